package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/warren-dev/warren/protocol"
	"github.com/warren-dev/warren/provider/inproc"
)

// TestWaitsListAndResumeByTokenID: a child's wait, whose secret nobody
// kept, is listed by Waits after a restart (path, kind, prompt, token id,
// deadline, start) and answered by its public token id; the child goes on;
// the same token id again, or one of another agent, is code 5.
func TestWaitsListAndResumeByTokenID(t *testing.T) {
	h := newHarness(t)
	h.prov.Register("approver", func(ctx context.Context, tr *inproc.Turn) (string, error) {
		r, err := tr.Call("await_input", map[string]any{"kind": "approval", "prompt": "deploy?", "timeout": 3600})
		if err != nil {
			return "", err
		}
		return "approved: " + r["response"].(string), nil
	})
	root := h.create("root", "", "echo")
	kid := h.create("kid", root, "approver")
	if res := h.send(kid, "deploy"); res.Status != "suspended" {
		t.Fatalf("send = %+v, want suspended", res)
	}
	h.restart()
	ws := h.c.Waits()
	if len(ws) != 1 {
		t.Fatalf("Waits after restart = %+v, want the kid's wait", ws)
	}
	w := ws[0]
	if w.AgentID != kid || w.Path != "root/kid" || w.Kind != "approval" || w.Prompt != "deploy?" ||
		!strings.HasPrefix(w.TokenID, "tok_") || w.RunID == "" || w.Deadline.IsZero() || w.Since.IsZero() || !w.Since.Before(w.Deadline) {
		t.Fatalf("wait = %+v", w)
	}
	if _, err := h.c.ResumeByID(context.Background(), root, w.TokenID, "yes"); codeOf(err) != protocol.CodeTokenRejected {
		t.Fatalf("token id of another agent's wait: err = %v, want code 5", err)
	}
	out, err := h.c.ResumeByID(context.Background(), kid, w.TokenID, "yes")
	if err != nil || out.Response != "approved: yes" {
		t.Fatalf("ResumeByID = %+v, %v", out, err)
	}
	if ws := h.c.Waits(); len(ws) != 0 {
		t.Fatalf("Waits after the answer = %+v, want none", ws)
	}
	for _, resp := range []string{"yes", "no"} {
		if _, err := h.c.ResumeByID(context.Background(), kid, w.TokenID, resp); codeOf(err) != protocol.CodeTokenRejected {
			t.Fatalf("second answer %q by token id: err = %v, want code 5", resp, err)
		}
	}
	if n := h.count(kid, "turn.complete"); n != 1 {
		t.Fatalf("turn.complete = %d, want 1", n)
	}
}

// TestUserNoticedWhenAWaitBegins: a wait anywhere in the tree puts one
// notice in the USER inbox naming the agent, the prompt, the token id and
// the command that answers it, never the secret; a restart (recovery sends
// the notices of pending waits again, for a crash that cut one off) does
// not duplicate it.
func TestUserNoticedWhenAWaitBegins(t *testing.T) {
	h := newHarness(t)
	h.prov.Register("approver", func(ctx context.Context, tr *inproc.Turn) (string, error) {
		r, err := tr.Call("await_input", map[string]any{"kind": "approval", "prompt": "deploy?", "timeout": 3600})
		if err != nil {
			return "", err
		}
		return "approved: " + r["response"].(string), nil
	})
	root := h.create("root", "", "echo")
	kid := h.create("kid", root, "approver")
	res := h.send(kid, "deploy")
	if res.Status != "suspended" {
		t.Fatalf("send = %+v", res)
	}
	secret := res.Token[strings.IndexByte(res.Token, '.')+1:]
	tokID := res.Token[:strings.IndexByte(res.Token, '.')]
	check := func(when string) {
		t.Helper()
		msgs := h.c.UserPending(context.Background())
		if len(msgs) != 1 {
			t.Fatalf("%s: USER inbox = %+v, want one notice", when, msgs)
		}
		m := msgs[0]
		want := "warren agent resume root/kid --token-id " + tokID + " RESPONSE"
		if m.Sender != "SYSTEM" || !strings.Contains(m.Payload, want) || !strings.Contains(m.Payload, "deploy?") ||
			!strings.Contains(m.Payload, "root/kid") || strings.Contains(m.Payload, secret) {
			t.Fatalf("%s: notice from %s = %q; want SYSTEM naming the agent, prompt and %q, without the secret", when, m.Sender, m.Payload, want)
		}
	}
	check("after the wait began")
	h.restart()
	check("after a restart")
}
