package daemon

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
	if _, err := h.c.ResumeByID(context.Background(), root, w.TokenID, "yes"); !protocol.IsCode(err, protocol.CodeTokenRejected) {
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
		if _, err := h.c.ResumeByID(context.Background(), kid, w.TokenID, resp); !protocol.IsCode(err, protocol.CodeTokenRejected) {
			t.Fatalf("second answer %q by token id: err = %v, want code 5", resp, err)
		}
	}
	if n := h.count(kid, "turn.complete"); n != 1 {
		t.Fatalf("turn.complete = %d, want 1", n)
	}
}
