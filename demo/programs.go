package demo

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/warren-dev/warren/provider/inproc"
)

// Models the demo registers with the inproc provider.
const (
	LeadModel   = "demo-lead"
	WorkerModel = "demo-worker"
)

// workerMarker starts a worker's instructions: "WORKER <self> next=<name>
// prev=<name> topic=<word>".
const workerMarker = "WORKER "

// summaryMarker starts the lead's message to USER.
const summaryMarker = "SUMMARY"

// team returns the demo's fixed team: worker names, in ring order, and
// their topics.
func team() (names, topics [3]string) {
	return [3]string{"w1", "w2", "w3"}, [3]string{"alpha", "bravo", "charlie"}
}

// Programs returns the demo team's behaviour for the inproc provider, keyed
// by model. Each program is stateless between turns: it decides what to do
// from the prompt and the session history (which, after a restart, the
// daemon injects into the prompt as text), so it behaves the same after a
// crash.
func Programs() map[string]inproc.Program {
	return map[string]inproc.Program{
		LeadModel:   leadOrWorker,
		WorkerModel: worker,
	}
}

// WorkerDelay is how long a worker turn works before acting: long enough
// that the demo can kill the daemon in the middle of one.
func WorkerDelay(name string) time.Duration {
	teamNames, _ := team()
	for i, n := range teamNames {
		if n == name {
			return 400*time.Millisecond + time.Duration(i)*150*time.Millisecond
		}
	}
	return 400 * time.Millisecond
}

// ExpectedResult is the deterministic result worker name reports.
func ExpectedResult(name string) string {
	teamNames, teamTopics := team()
	for i, n := range teamNames {
		if n == name {
			t := teamTopics[i]
			return fmt.Sprintf("RESULT %s: %s has %d letters", n, strings.ToUpper(t), len(t))
		}
	}
	return "RESULT " + name + ": unknown"
}

// WorkerNames lists the workers the lead spawns.
func WorkerNames() []string {
	names, _ := team()
	return names[:]
}

// transcript is everything the agent has seen: the prompt (which after a
// restart carries the injected history block) and the session's completed
// turns.
func transcript(t *inproc.Turn) string {
	var b strings.Builder
	b.WriteString(t.Prompt)
	for _, h := range t.History {
		b.WriteString("\n")
		b.WriteString(h.Message)
		for _, c := range h.Calls {
			fmt.Fprintf(&b, "\n[call %s %v]", c.Tool, c.Args)
		}
		b.WriteString("\n")
		b.WriteString(h.Response)
	}
	return b.String()
}

// leadOrWorker runs the lead; a child spawned without a model inherits the
// lead's, so instructions starting with the worker marker select the worker.
func leadOrWorker(ctx context.Context, t *inproc.Turn) (string, error) {
	if strings.HasPrefix(t.Instructions, workerMarker) {
		return worker(ctx, t)
	}
	return lead(ctx, t)
}

// lead spawns the workers on its first turn, then counts the results the
// workers' complete() calls deliver, and once all have arrived sends USER a
// summary.
func lead(_ context.Context, t *inproc.Turn) (string, error) {
	teamNames, teamTopics := team()
	seen := transcript(t)
	spawned := strings.Contains(seen, "spawn_agent") || strings.Contains(seen, "RESULT ")
	if !spawned {
		if res, err := t.Call("list_children", nil); err == nil {
			if kids, _ := res["children"].([]any); len(kids) > 0 {
				spawned = true
			}
		}
	}
	if !spawned {
		for i, n := range teamNames {
			next := teamNames[(i+1)%len(teamNames)]
			prev := teamNames[(i+len(teamNames)-1)%len(teamNames)]
			args := map[string]any{
				"name": n,
				"instructions": fmt.Sprintf("%s%s next=%s prev=%s topic=%s\nSay hello to %s, wait for %s's hello, then complete with your result.",
					workerMarker, n, next, prev, teamTopics[i], next, prev),
				"provider": "inproc",
				"model":    WorkerModel,
			}
			res, err := t.Call("spawn_agent", args)
			if err != nil {
				return "", fmt.Errorf("spawn %s: %w", n, err)
			}
			if e, ok := res["error"]; ok {
				return "", fmt.Errorf("spawn %s: %v", n, e)
			}
		}
		return fmt.Sprintf("spawned %s; waiting for their results", strings.Join(teamNames[:], ", ")), nil
	}
	var got []string
	for _, n := range teamNames {
		if r := ExpectedResult(n); strings.Contains(seen, r) {
			got = append(got, r)
		}
	}
	if len(got) < len(teamNames) {
		return fmt.Sprintf("%d of %d results in", len(got), len(teamNames)), nil
	}
	if strings.Contains(seen, summaryMarker) {
		return "summary already sent", nil
	}
	text := fmt.Sprintf("%s: all %d workers finished. %s", summaryMarker, len(got), strings.Join(got, "; "))
	res, err := t.Call("send_message", map[string]any{"recipient": "USER", "text": text})
	if err != nil {
		return "", fmt.Errorf("send the summary: %w", err)
	}
	if e, ok := res["error"]; ok {
		return "", fmt.Errorf("send the summary: %v", e)
	}
	return "summary sent to USER", nil
}

// workerSpec is parsed from the first line of a worker's instructions.
type workerSpec struct{ self, next, prev string }

func parseWorker(instr string) (workerSpec, bool) {
	line, _, _ := strings.Cut(instr, "\n")
	if !strings.HasPrefix(line, workerMarker) {
		return workerSpec{}, false
	}
	var w workerSpec
	for i, f := range strings.Fields(strings.TrimPrefix(line, workerMarker)) {
		switch {
		case i == 0:
			w.self = f
		case strings.HasPrefix(f, "next="):
			w.next = strings.TrimPrefix(f, "next=")
		case strings.HasPrefix(f, "prev="):
			w.prev = strings.TrimPrefix(f, "prev=")
		}
	}
	return w, w.self != "" && w.next != "" && w.prev != ""
}

// worker says hello to its next sibling once, and completes with its result
// on the first turn that has seen its previous sibling's hello.
func worker(ctx context.Context, t *inproc.Turn) (string, error) {
	w, ok := parseWorker(t.Instructions)
	if !ok {
		return "", fmt.Errorf("demo worker: instructions do not start with %q", workerMarker+"<name> next=<name> prev=<name>")
	}
	timer := time.NewTimer(WorkerDelay(w.self))
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
		return "", fmt.Errorf("demo worker %s interrupted: %w", w.self, ctx.Err())
	}
	seen := transcript(t)
	hello := "hello from " + w.self
	if !strings.Contains(seen, hello) {
		// A tool-level failure (the sibling already finished) is not fatal:
		// the hello only matters while the sibling waits for it.
		if _, err := t.Call("send_message", map[string]any{"recipient": w.next, "text": hello}); err != nil {
			return "", fmt.Errorf("demo worker %s: say hello: %w", w.self, err)
		}
	}
	if !strings.Contains(seen, "hello from "+w.prev) {
		return fmt.Sprintf("said hello to %s; waiting for %s", w.next, w.prev), nil
	}
	res, err := t.Call("complete", map[string]any{"result": ExpectedResult(w.self)})
	if err != nil {
		return "", fmt.Errorf("demo worker %s: complete: %w", w.self, err)
	}
	if e, ok := res["error"]; ok {
		return "", fmt.Errorf("demo worker %s: complete: %v", w.self, e)
	}
	return "completed: " + ExpectedResult(w.self), nil
}
