package demo

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/inproc"
)

// recorder is a ToolCaller that records calls and answers like the daemon.
type recorder struct {
	mu       sync.Mutex
	calls    []provider.ToolCall
	children []any
}

func (r *recorder) CallTool(_ context.Context, tool string, args map[string]any) (map[string]any, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, provider.ToolCall{Tool: tool, Args: args})
	switch tool {
	case "list_children":
		return map[string]any{"children": r.children}, nil
	case "spawn_agent":
		return map[string]any{"status": "accepted", "name": args["name"]}, nil
	}
	return map[string]any{"status": "sent"}, nil
}

func (r *recorder) take() []provider.ToolCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.calls
	r.calls = nil
	return c
}

func session(t *testing.T, model, instructions string) provider.Session {
	t.Helper()
	p := inproc.New("inproc", inproc.Options{})
	for m, prog := range Programs() {
		p.Register(m, prog)
	}
	s, err := p.Create(context.Background(), provider.Spec{AgentID: "a", Model: model, Instructions: instructions})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop() })
	return s
}

func send(t *testing.T, s provider.Session, rec *recorder, prompt string) string {
	t.Helper()
	resp, err := s.Send(context.Background(), prompt, provider.TurnIO{Tools: rec})
	if err != nil {
		t.Fatalf("send %q: %v", prompt, err)
	}
	return resp
}

func TestLeadSpawnsThenSummarisesOnce(t *testing.T) {
	rec := &recorder{}
	s := session(t, LeadModel, "You lead.")
	send(t, s, rec, Task)
	var spawned []string
	for _, c := range rec.take() {
		if c.Tool == "spawn_agent" {
			if c.Args["model"] != WorkerModel || c.Args["provider"] != "inproc" {
				t.Errorf("spawn_agent args %v, want provider inproc model %s", c.Args, WorkerModel)
			}
			if !strings.HasPrefix(c.Args["instructions"].(string), workerMarker+c.Args["name"].(string)+" ") {
				t.Errorf("worker instructions %q", c.Args["instructions"])
			}
			spawned = append(spawned, c.Args["name"].(string))
		}
	}
	if strings.Join(spawned, ",") != "w1,w2,w3" {
		t.Fatalf("lead spawned %v, want w1,w2,w3", spawned)
	}
	// Two results in: no summary yet.
	send(t, s, rec, "1. From w1: "+ExpectedResult("w1")+"\n2. From w3: "+ExpectedResult("w3"))
	for _, c := range rec.take() {
		if c.Tool == "spawn_agent" || c.Tool == "send_message" {
			t.Errorf("lead called %s with 2 of 3 results", c.Tool)
		}
	}
	send(t, s, rec, "Message from w2:\n"+ExpectedResult("w2"))
	calls := rec.take()
	if len(calls) != 1 || calls[0].Tool != "send_message" || calls[0].Args["recipient"] != "USER" {
		t.Fatalf("lead with all results called %v, want one send_message to USER", calls)
	}
	text := calls[0].Args["text"].(string)
	for _, w := range WorkerNames() {
		if !strings.Contains(text, ExpectedResult(w)) {
			t.Errorf("summary %q lacks %q", text, ExpectedResult(w))
		}
	}
	// A later wake does not send it again.
	send(t, s, rec, "Message from SYSTEM:\nping")
	for _, c := range rec.take() {
		if c.Tool == "send_message" {
			t.Errorf("lead sent a second summary")
		}
	}
}

func TestLeadAfterRestartDoesNotRespawn(t *testing.T) {
	rec := &recorder{children: []any{map[string]any{"name": "w1"}}}
	s := session(t, LeadModel, "You lead.")
	// A fresh session after a restart: the history is in the prompt, and
	// children exist.
	send(t, s, rec, "Message from w1:\n"+ExpectedResult("w1"))
	for _, c := range rec.take() {
		if c.Tool == "spawn_agent" {
			t.Fatalf("lead spawned again after a restart")
		}
	}
}

func TestWorkerHelloThenComplete(t *testing.T) {
	rec := &recorder{}
	instr := workerMarker + "w2 next=w3 prev=w1 topic=bravo\nwork"
	// Spawned with the lead's model (no model override), the lead's
	// program dispatches to the worker.
	for _, model := range []string{WorkerModel, LeadModel} {
		s := session(t, model, instr)
		if resp := send(t, s, rec, "You have been spawned."); !strings.Contains(resp, "waiting for w1") {
			t.Errorf("%s: bootstrap response %q", model, resp)
		}
		calls := rec.take()
		if len(calls) != 1 || calls[0].Tool != "send_message" || calls[0].Args["recipient"] != "w3" || calls[0].Args["text"] != "hello from w2" {
			t.Fatalf("%s: bootstrap calls %v, want one hello to w3", model, calls)
		}
		send(t, s, rec, "Message from w1:\nhello from w1")
		calls = rec.take()
		if len(calls) != 1 || calls[0].Tool != "complete" || calls[0].Args["result"] != ExpectedResult("w2") {
			t.Fatalf("%s: second turn calls %v, want complete(%q) and no second hello", model, calls, ExpectedResult("w2"))
		}
	}
}

func TestWorkerWokenByHelloFirstDoesBoth(t *testing.T) {
	rec := &recorder{}
	s := session(t, WorkerModel, workerMarker+"w1 next=w2 prev=w3 topic=alpha")
	send(t, s, rec, "Message from w3:\nhello from w3")
	calls := rec.take()
	if len(calls) != 2 || calls[0].Tool != "send_message" || calls[1].Tool != "complete" {
		t.Fatalf("calls %v, want hello then complete", calls)
	}
}

func TestWorkerBadInstructionsFailsTurn(t *testing.T) {
	s := session(t, WorkerModel, "no marker")
	if _, err := s.Send(context.Background(), "go", provider.TurnIO{Tools: &recorder{}}); err == nil || !strings.Contains(err.Error(), workerMarker) {
		t.Errorf("a worker without the marker: err %v", err)
	}
}

func TestExpectedResultsAreDistinct(t *testing.T) {
	seen := map[string]bool{}
	for _, w := range WorkerNames() {
		r := ExpectedResult(w)
		if seen[r] || !strings.HasPrefix(r, "RESULT "+w+": ") {
			t.Errorf("result %q", r)
		}
		seen[r] = true
	}
}
