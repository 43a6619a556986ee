package engine

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/protocol"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/schedule"
)

// approver asks for approval, then reports the answer.
func approver(calls *int, mu *sync.Mutex) inproc.Program {
	return func(ctx context.Context, tr *inproc.Turn) (string, error) {
		r, err := tr.Call("send_message", map[string]any{"recipient": "USER", "text": "about to ask"})
		if err := errOf(r, err); err != nil {
			return "", err
		}
		mu.Lock()
		*calls++
		mu.Unlock()
		r, err = tr.Call("await_input", map[string]any{"kind": "approval", "prompt": "deploy?", "timeout": 3600})
		if err != nil {
			return "", err
		}
		return "approved: " + r["response"].(string), nil
	}
}

func TestAwaitInputSuspendsAndTokenResumesOnce(t *testing.T) {
	h := newHarness(t)
	var mu sync.Mutex
	sends := 0
	h.prov.Register("approver", approver(&sends, &mu))
	id := h.create("lead", "", "approver")
	res := h.send(id, "deploy")
	if res.Status != "suspended" || res.Token == "" || res.Wait == nil || res.Wait.Prompt != "deploy?" {
		t.Fatalf("send result = %+v", res)
	}
	if s := h.statusOf(id); s != "suspended" {
		t.Fatalf("status = %s", s)
	}
	view, _ := h.c.Inspect(context.Background(), id)
	if w := view.Wait; w == nil || w.Prompt != "deploy?" || strings.Contains(mustString(view), res.Token) {
		t.Fatalf("inspect must show the wait and never the secret: %v", view)
	}
	// A wrong secret is rejected with code 5.
	bad := res.Token[:strings.IndexByte(res.Token, '.')+1] + "AAAA"
	if _, err := h.c.Resume(context.Background(), id, bad, "yes"); codeOf(err) != protocol.CodeTokenRejected {
		t.Fatalf("wrong secret: err = %v", err)
	}
	out, err := h.c.Resume(context.Background(), id, res.Token, "yes")
	if err != nil || out.Response != "approved: yes" {
		t.Fatalf("resume = %+v, %v", out, err)
	}
	again, err := h.c.Resume(context.Background(), id, res.Token, "yes")
	if err != nil || again.Response != "approved: yes" {
		t.Fatalf("repeated resume = %+v, %v", again, err)
	}
	if n := h.count(id, "turn.complete"); n != 1 {
		t.Fatalf("turn.complete = %d; a repeated resume must start nothing", n)
	}
	if _, err := h.c.Resume(context.Background(), id, res.Token, "no"); codeOf(err) != protocol.CodeTokenRejected {
		t.Fatalf("consumed token with another response: err = %v", err)
	}
	if n := userMsgsFrom(h, id); n != 1 {
		t.Fatalf("USER has %d messages from the agent; the send before the wait must happen once", n)
	}
	for _, ev := range []string{"run.waiting", "token.minted", "token.consumed", "run.resumed"} {
		if h.count(id, ev) != 1 {
			t.Fatalf("%s logged %d times", ev, h.count(id, ev))
		}
	}
}

func TestWaitSurvivesCrashAndResumes(t *testing.T) {
	for _, mode := range []faultfs.RebootMode{faultfs.ProcessCrash, faultfs.PowerLoss} {
		h := newHarness(t)
		var mu sync.Mutex
		sends := 0
		h.prov.Register("approver", approver(&sends, &mu))
		id := h.create("lead", "", "approver")
		res := h.send(id, "deploy")
		h.crash(mode)
		h.prov.Register("approver", approver(&sends, &mu))
		if s := h.statusOf(id); s != "suspended" {
			t.Fatalf("status after crash = %s", s)
		}
		out, err := h.c.Resume(context.Background(), id, res.Token, "ok")
		if err != nil || out.Response != "approved: ok" {
			t.Fatalf("resume after crash = %+v, %v", out, err)
		}
		if n := userMsgsFrom(h, id); n != 1 {
			t.Fatalf("USER has %d messages from the agent; the send before the wait must happen once", n)
		}
		// Repeating the same resume after another restart returns the
		// same result from the log and starts nothing.
		h.crash(mode)
		again, err := h.c.Resume(context.Background(), id, res.Token, "ok")
		if err != nil || again.Response != "approved: ok" {
			t.Fatalf("repeated resume after a restart = %+v, %v", again, err)
		}
		if n := h.count(id, "turn.complete"); n != 1 {
			t.Fatalf("a repeated resume started a turn (turn.complete = %d)", n)
		}
		if _, err := h.c.Resume(context.Background(), id, res.Token, "other"); codeOf(err) != protocol.CodeTokenRejected {
			t.Fatalf("the consumed token with another response after a restart: %v", err)
		}
	}
}

// TestWaitDeadlineExpiresAndRefusesResume: the wait's deadline timer,
// fired by moving the fake clock past the deadline (no sweep is called),
// expires the wait; a resume is refused after.
func TestWaitDeadlineExpiresAndRefusesResume(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.clock = schedule.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) })
	h.prov.Register("asker", func(ctx context.Context, tr *inproc.Turn) (string, error) {
		r, err := tr.Call("await_input", map[string]any{"kind": "question", "prompt": "name?", "timeout": 60})
		if err != nil {
			return "", err
		}
		return r["response"].(string), nil
	})
	id := h.create("lead", "", "asker")
	res := h.send(id, "ask")
	h.clock.Advance(2 * time.Minute)
	if s := h.statusOf(id); s != "interrupted_waiting" {
		t.Fatalf("status after the deadline = %s", s)
	}
	if h.count(id, "token.expired") != 1 || h.count(id, "run.interrupted") != 1 {
		t.Fatalf("expiry not logged")
	}
	if _, err := h.c.Resume(context.Background(), id, res.Token, "bob"); codeOf(err) != protocol.CodeTokenRejected {
		t.Fatalf("resume after expiry: err = %v", err)
	}
}

func TestUserMessageRevokesTheWait(t *testing.T) {
	h := newHarness(t)
	h.prov.Register("asker", func(ctx context.Context, tr *inproc.Turn) (string, error) {
		if tr.Prompt != "ask" {
			return "fresh: " + tr.Prompt, nil
		}
		r, err := tr.Call("await_input", map[string]any{"kind": "question", "prompt": "name?", "timeout": 60})
		if err != nil {
			return "", err
		}
		return r["response"].(string), nil
	})
	id := h.create("lead", "", "asker")
	res := h.send(id, "ask")
	if out := h.send(id, "something else"); out.Response != "fresh: something else" {
		t.Fatalf("new run = %+v", out)
	}
	if h.count(id, "token.revoked") != 1 {
		t.Fatalf("token.revoked not logged")
	}
	if _, err := h.c.Resume(context.Background(), id, res.Token, "x"); codeOf(err) != protocol.CodeTokenRejected {
		t.Fatalf("resume with a revoked token: err = %v", err)
	}
}

func TestCancelWaitLeavesAgentIdle(t *testing.T) {
	h := newHarness(t)
	h.prov.Register("asker", func(ctx context.Context, tr *inproc.Turn) (string, error) {
		_, err := tr.Call("await_input", map[string]any{"kind": "q", "prompt": "?", "timeout": 60})
		return "", err
	})
	id := h.create("lead", "", "asker")
	h.send(id, "ask")
	if err := h.c.Cancel(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	if s := h.statusOf(id); s != "idle" {
		t.Fatalf("status after cancel = %s", s)
	}
	if h.count(id, "token.revoked") != 1 || h.count(id, "turn.cancelled") != 1 {
		t.Fatalf("cancel not logged")
	}
}

func TestConcurrentResumesExactlyOneWins(t *testing.T) {
	h := newHarness(t)
	var mu sync.Mutex
	n := 0
	h.prov.Register("approver", approver(&n, &mu))
	id := h.create("lead", "", "approver")
	res := h.send(id, "deploy")
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = h.c.Resume(context.Background(), id, res.Token, "yes")
		}()
	}
	wg.Wait()
	h.quiet()
	if c := h.count(id, "token.consumed"); c != 1 {
		t.Fatalf("token.consumed = %d", c)
	}
	if c := h.count(id, "turn.complete"); c != 1 {
		t.Fatalf("turn.complete = %d", c)
	}
}

func mustString(v any) string {
	return strings.ReplaceAll(strings.TrimSpace(fmtAny(v)), "\n", " ")
}

// userMsgsFrom counts the USER inbox's messages sent by agent id (not
// SYSTEM's notices).
func userMsgsFrom(h *harness, id string) int {
	n := 0
	for _, m := range h.c.UserPending(context.Background()) {
		if m.Sender == id {
			n++
		}
	}
	return n
}
