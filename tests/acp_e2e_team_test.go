package tests

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warren-dev/warren/provider/llmfake"
)

// teamModels are the fake models of the scenario: the lead's (Anthropic,
// for claude-agent-acp) and the worker's (Responses, for codex-acp).
type teamModels struct {
	mu          sync.Mutex
	stalled     chan struct{}
	stalledOnce bool
	leadReqs    []llmfake.Request
	workerReqs  []llmfake.Request
}

// promptIndex is the index of the last user message containing any of
// marks, and the tool results after it.
func promptIndex(msgs []llmfake.Msg, marks ...string) (int, int) {
	pi := -1
	for i, m := range msgs {
		for _, mk := range marks {
			if m.Role == "user" && strings.Contains(m.Text, mk) {
				pi = i
			}
		}
	}
	tools := 0
	if pi >= 0 {
		for _, m := range msgs[pi+1:] {
			if m.Role == "tool" {
				tools++
			}
		}
	}
	return pi, tools
}

// lead: E2E-LEAD-1 spawns the Codex worker "coder"; messages from the
// worker and E2E-LEAD-2 get a short text.
func (tm *teamModels) lead(r llmfake.Request) llmfake.Reply {
	spawn, ok := r.Tool("spawn_agent")
	if !ok {
		return llmfake.Reply{Text: "E2E title"}
	}
	tm.mu.Lock()
	tm.leadReqs = append(tm.leadReqs, r)
	tm.mu.Unlock()
	_, msgs := r.Messages()
	pi, tools := promptIndex(msgs, "E2E-LEAD", "E2E-PROGRESS", "E2E-WORK-DONE")
	switch {
	case pi < 0:
		return llmfake.Reply{Text: "no E2E prompt"}
	case tools > 0:
		return llmfake.Reply{Text: "E2E lead: the worker is spawned"}
	case strings.Contains(msgs[pi].Text, "E2E-LEAD-1"):
		return llmfake.Reply{Calls: []llmfake.Call{spawn.Call("toolu_spawn_01",
			`{"name":"coder","provider":"codex","instructions":"E2E-WORKER: do the work and report progress to your parent with send_message."}`)}}
	}
	return llmfake.Reply{Text: "E2E lead: noted"}
}

// worker: on its bootstrap prompt it sends E2E-PROGRESS to the lead; after
// that result it stalls once (the daemon is killed there); then it sends
// E2E-WORK-DONE and ends with a text.
func (tm *teamModels) worker(r llmfake.Request) llmfake.Reply {
	send, ok := r.Tool("send_message")
	if !ok {
		return llmfake.Reply{Text: "E2E title"}
	}
	tm.mu.Lock()
	defer tm.mu.Unlock()
	tm.workerReqs = append(tm.workerReqs, r)
	_, msgs := r.Messages()
	pi, tools := promptIndex(msgs, "You have been spawned")
	switch {
	case pi < 0:
		return llmfake.Reply{Text: "no bootstrap prompt"}
	case tools == 0:
		return llmfake.Reply{Calls: []llmfake.Call{send.Call("call_progress", `{"recipient":"lead","text":"E2E-PROGRESS: half done"}`)}}
	case tools == 1 && !tm.stalledOnce:
		tm.stalledOnce = true
		tm.stalled <- struct{}{}
		return llmfake.Reply{Text: "working on the second half", Stall: true, StallAfter: 3}
	case tools == 1:
		return llmfake.Reply{Calls: []llmfake.Call{send.Call("call_done", `{"recipient":"lead","text":"E2E-WORK-DONE: all done"}`)}}
	}
	return llmfake.Reply{Text: "E2E worker finished"}
}

// TestE2EClaudeLeadCodexWorker is the whole promise with real agents: a
// Claude Code lead (claude-agent-acp, fake Anthropic model) spawns a Codex
// worker (codex-acp, fake Responses model) through spawn_agent; the worker
// messages its progress back; the daemon is killed (-9) while the worker's
// model is mid-answer; after the restart the tree, the lead's inbox and
// both agents' native sessions are back, the worker's interrupted run is
// re-run (agent resume) and finishes, and each side effect happened once:
// one worker, one progress message, one done message.
func TestE2EClaudeLeadCodexWorker(t *testing.T) {
	claude, codex := e2eAgentNamed("claude"), e2eAgentNamed("codex")
	claudeBin, codexBin := e2eAgentBin(t, claude), e2eAgentBin(t, codex)
	tm := &teamModels{stalled: make(chan struct{}, 4)}
	fl, fw := llmfake.New(llmfake.Anthropic), llmfake.New(llmfake.Responses)
	defer fl.Close()
	defer fw.Close()
	fl.Respond(tm.lead)
	fw.Respond(tm.worker)

	d := newTestDaemon(t, modeBinary)
	work := filepath.Join(d.dir, "work")
	if err := os.MkdirAll(work, 0o700); err != nil {
		t.Fatal(err)
	}
	homes := filepath.Join(d.dir, "agenthome")
	writeACPConfig(t, d, map[string]map[string]any{
		"claude": e2eEntry(t, claude, claudeBin, fl, filepath.Join(homes, "claude")),
		"codex":  e2eEntry(t, codex, codexBin, fw, filepath.Join(homes, "codex")),
	})
	d.Start()
	lead := createAgentIn(t, d, "lead", "claude", "", "", work)

	res := d.callN("agent.send", map[string]any{"agent_id": lead, "message": "E2E-LEAD-1: spawn a Codex worker for the job."})
	if r := str(res["response"]); !strings.Contains(r, "the worker is spawned") {
		t.Fatalf("the lead's turn = %v; lead stderr:\n%s", res, agentStderr(d, lead))
	}
	coder := childNamed(t, d, lead, "coder")
	// The worker sends its progress, the lead takes it in a turn, and the
	// worker's model stalls mid-answer.
	select {
	case <-tm.stalled:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the worker never got to its second step; worker log: %v\nstderr:\n%s", logEvents(t, d, coder), agentStderr(d, coder))
	}
	waitEvent(t, d, lead, "the lead's turn on the progress message", func(ev string, data map[string]any) bool {
		return ev == "turn.complete" && strings.Contains(mustJSON(t, data), "noted")
	})
	progressID := messageWith(t, d, lead, "E2E-PROGRESS")
	leadPid, coderPid := agentPid(t, d, lead), agentPid(t, d, coder)

	d.Kill()
	d.Start()
	waitGroupEmpty(t, leadPid, "the lead's agent process group after kill -9")
	waitGroupEmpty(t, coderPid, "the worker's agent process group after kill -9")

	// The tree is back.
	if c := childNamed(t, d, lead, "coder"); c != coder {
		t.Fatalf("after the restart the lead's child coder is %s, was %s", c, coder)
	}
	st := agentStatus(t, d, coder)
	if st["status"] != "interrupted_startup" || st["provider"] != "codex" {
		t.Fatalf("the worker after the restart: %v, want interrupted_startup on codex", st)
	}
	// The worker's run is re-run; its native session comes back; the
	// progress message is answered from the log, the rest runs.
	out := d.callN("agent.resume", map[string]any{"agent_id": coder})
	if r := str(out["response"]); !strings.Contains(r, "E2E worker finished") {
		t.Fatalf("the worker's re-run = %v; stderr:\n%s", out, agentStderr(d, coder))
	}
	restored := eventsNamed(t, d, coder, "session.restored")
	if len(restored) != 1 || restored[0]["strategy"] != "native" {
		t.Fatalf("the worker's session.restored %v: want one, native; daemon log:\n%s", restored, grepLines(d.Output(), "restore"))
	}
	tm.mu.Lock()
	rerun := tm.workerReqs[len(tm.workerReqs)-3] // the re-run's first request
	tm.mu.Unlock()
	if _, msgs := rerun.Messages(); !hasToolResult(msgs, "call_progress", progressID) {
		t.Fatalf("the worker's restored session did not carry its first run (the progress call and its result): %+v", msgs)
	}
	doneID := waitMessageWith(t, d, lead, "E2E-WORK-DONE")
	noted := 0 // the log is streamed from its start: the second such turn
	waitEvent(t, d, lead, "the lead's turn on the done message", func(ev string, data map[string]any) bool {
		if ev == "turn.complete" && strings.Contains(mustJSON(t, data), "noted") {
			noted++
		}
		return noted == 2
	})
	lr := eventsNamed(t, d, lead, "session.restored")
	if len(lr) != 1 || lr[0]["strategy"] != "native" {
		t.Fatalf("the lead's session.restored %v: want one, native", lr)
	}
	tm.mu.Lock()
	last := tm.leadReqs[len(tm.leadReqs)-1]
	tm.mu.Unlock()
	// Its first turn is an earlier user message, and its answer to the
	// progress message is in its history (claude-agent-acp's resumed
	// history merges that answer into the earlier assistant message and the
	// two worker messages into the last user message).
	if !earlierUserText(last, "E2E-LEAD-1") || !assistantSaid(last, "E2E lead: noted") {
		_, msgs := last.Messages()
		t.Fatalf("the lead's restored session lacks its earlier turns: %+v", msgs)
	}

	// Each side effect once.
	if n := enqueuedCount(t, d, lead, progressID); n != 1 {
		t.Fatalf("progress message enqueued %d times, want 1", n)
	}
	if n := enqueuedCount(t, d, lead, doneID); n != 1 {
		t.Fatalf("done message enqueued %d times, want 1", n)
	}
	if n := countMessagesWith(t, d, lead, "E2E-"); n != 2 {
		t.Fatalf("the lead got %d messages from the worker, want 2 (progress, done)", n)
	}
	var children []string
	for _, a := range d.callN("agent.list", map[string]any{"all": true})["agents"].([]any) {
		if m := a.(map[string]any); m["parent_id"] == lead {
			children = append(children, str(m["name"]))
		}
	}
	if len(children) != 1 {
		t.Fatalf("the lead has children %v, want the one coder", children)
	}
	t.Logf("worker restored by %v, lead restored by %v; progress %s and done %s each enqueued once", restored[0]["method"], lr[0]["method"], progressID, doneID)
	leadPid, coderPid = agentPid(t, d, lead), agentPid(t, d, coder)
	if err := d.Stop(); err != nil {
		t.Fatal(err)
	}
	waitGroupEmpty(t, leadPid, "the lead's process group after the stop")
	waitGroupEmpty(t, coderPid, "the worker's process group after the stop")
}

// childNamed returns the id of parent's child called name.
func childNamed(t *testing.T, d *testDaemon, parent, name string) string {
	t.Helper()
	for _, a := range d.callN("agent.list", nil)["agents"].([]any) {
		if m := a.(map[string]any); m["parent_id"] == parent && m["name"] == name {
			return str(m["agent_id"])
		}
	}
	t.Fatalf("no child %q of %s in agent.list", name, parent)
	return ""
}

func agentStatus(t *testing.T, d *testDaemon, id string) map[string]any {
	t.Helper()
	for _, a := range d.callN("agent.list", nil)["agents"].([]any) {
		if m := a.(map[string]any); m["agent_id"] == id {
			return m
		}
	}
	t.Fatalf("agent %s not listed", id)
	return nil
}

// messageWith returns the id of the message in id's log whose text has s.
func messageWith(t *testing.T, d *testDaemon, id, s string) string {
	t.Helper()
	for _, data := range eventsNamed(t, d, id, "message.enqueued") {
		if strings.Contains(mustJSON(t, data), s) {
			if mid := str(data["message_id"]); mid != "" {
				return mid
			}
			if m, ok := data["message"].(map[string]any); ok {
				return str(m["id"])
			}
		}
	}
	t.Fatalf("no message with %q in %s's log", s, id)
	return ""
}

// waitMessageWith waits for a message with s in id's log.
func waitMessageWith(t *testing.T, d *testDaemon, id, s string) string {
	t.Helper()
	waitEvent(t, d, id, "a message with "+s, func(ev string, data map[string]any) bool {
		return ev == "message.enqueued" && strings.Contains(mustJSON(t, data), s)
	})
	return messageWith(t, d, id, s)
}

func countMessagesWith(t *testing.T, d *testDaemon, id, s string) int {
	n := 0
	for _, data := range eventsNamed(t, d, id, "message.enqueued") {
		if strings.Contains(mustJSON(t, data), s) {
			n++
		}
	}
	return n
}

// hasToolResult says whether msgs hold the result of call id that quotes
// text.
func hasToolResult(msgs []llmfake.Msg, id, text string) bool {
	for _, m := range msgs {
		if m.Role == "tool" && m.CallID == id && strings.Contains(m.Text, text) {
			return true
		}
	}
	return false
}

// assistantSaid says whether an assistant message of the request has s.
func assistantSaid(r llmfake.Request, s string) bool {
	_, msgs := r.Messages()
	for _, m := range msgs {
		if m.Role == "assistant" && strings.Contains(m.Text, s) {
			return true
		}
	}
	return false
}
