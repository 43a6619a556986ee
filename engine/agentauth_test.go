package engine

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/warren-dev/warren/protocol"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/schema"
)

// TestCredentialCallJoinsTheRunningTurnAndIsReplayed: a call made with an
// agent's credential while its turn runs takes the turn's next position, is
// logged as that run's tool.call, and is answered from the log (not run
// again) when the run is re-run after a suspension; between turns it is
// refused with code 2.
func TestCredentialCallJoinsTheRunningTurnAndIsReplayed(t *testing.T) {
	h := newHarness(t)
	started := make(chan *inproc.Turn)
	release := make(chan struct{})
	h.prov.Register("ext", inproc.Signal(started, inproc.Block(release, func(ctx context.Context, tr *inproc.Turn) (string, error) {
		r, err := tr.Call("await_input", map[string]any{"kind": "approval", "prompt": "ok?", "timeout": 3600})
		if err != nil {
			return "", err
		}
		return "answer " + r["response"].(string), nil
	})))
	parent := h.create("p", "", "echo")
	child := h.create("c", parent, "ext")
	ctx := context.Background()
	toParent := map[string]any{"recipient": "p", "text": "from the socket"}

	if _, err := h.c.CallToolInTurn(ctx, child, "send_message", toParent); codeOf(err) != protocol.CodeInvalid {
		t.Fatalf("a credential call between turns: %v, want code 2", err)
	}

	results := make(chan TurnResult, 1)
	go func() { results <- h.send(child, "go") }()
	<-started
	first, err := h.c.CallToolInTurn(ctx, child, "send_message", toParent)
	if err != nil || first["status"] != "sent" {
		t.Fatalf("credential call in the turn: %v, %v", first, err)
	}
	release <- struct{}{}
	res := <-results
	if res.Status != "suspended" || res.Token == "" {
		t.Fatalf("turn: %+v, want it suspended on await_input", res)
	}
	var calls []string
	for _, e := range h.entries(child) {
		if e.Event == schema.ToolCall {
			var d schema.ToolCallData
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			if d.RunID != res.RunID {
				t.Fatalf("tool.call %s logged with run %q, the turn's run is %q", d.Tool, d.RunID, res.RunID)
			}
			calls = append(calls, d.Tool)
		}
	}
	if len(calls) != 1 || calls[0] != "send_message" {
		t.Fatalf("the run's calls are %v, want the socket's send_message (the wait is run.waiting)", calls)
	}

	// The resumed run is re-run: the socket call at position 0 is answered
	// from the log.
	resumed := make(chan TurnResult, 1)
	go func() {
		r, err := h.c.Resume(ctx, child, res.Token, "yes")
		if err != nil {
			t.Errorf("resume: %v", err)
		}
		resumed <- r
	}()
	<-started
	again, err := h.c.CallToolInTurn(ctx, child, "send_message", toParent)
	if err != nil || again["message_id"] != first["message_id"] {
		t.Fatalf("the re-run's socket call: %v, %v; want the recorded result %v", again, err, first)
	}
	release <- struct{}{}
	if r := <-resumed; r.Response != "answer yes" {
		t.Fatalf("resumed turn: %+v", r)
	}
	if n := h.count(parent, "message.enqueued"); n != 1 {
		t.Fatalf("the parent's log has %d message.enqueued, want 1 (the re-run's call was not executed again)", n)
	}
	if n := h.count(child, schema.ToolCall); n != 2 {
		t.Fatalf("the child's log has %d tool.call entries, want 2 (send_message once, then the answered await_input)", n)
	}
}

// TestCredentialAwaitInputSuspendsTheTurn: await_input called over the
// socket ends the attempt like a provider's own: the run waits.
func TestCredentialAwaitInputSuspendsTheTurn(t *testing.T) {
	h := newHarness(t)
	started := make(chan *inproc.Turn)
	h.prov.Register("wait", inproc.Signal(started, inproc.Block(make(chan struct{}), inproc.Echo)))
	id := h.create("w", "", "wait")
	results := make(chan TurnResult, 1)
	go func() { results <- h.send(id, "go") }()
	<-started
	_, err := h.c.CallToolInTurn(context.Background(), id, "await_input", map[string]any{"kind": "approval", "prompt": "ok?", "timeout": 3600})
	if codeOf(err) != protocol.CodeUnavailable {
		t.Fatalf("socket await_input: %v, want code 6 saying the turn ends", err)
	}
	if res := <-results; res.Status != "suspended" || res.Token == "" || res.Wait == nil || res.Wait.Prompt != "ok?" {
		t.Fatalf("turn: %+v, want it suspended on the socket's await_input", res)
	}
}
