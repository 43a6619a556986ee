package engine

import (
	"context"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/protocol"
	"github.com/warren-dev/warren/provider/inproc"
	"testing"
)

// TestSendSaysWhatItRevokedOrAbandoned: a user message to a suspended agent
// revokes its wait and its result names the wait (token id, kind); to an
// interrupted_startup agent it abandons the interrupted run and its result
// names that run; an ordinary send names neither.
func TestSendSaysWhatItRevokedOrAbandoned(t *testing.T) {
	h := newHarness(t)
	started := make(chan struct{}, 4)
	h.prov.Register("moody", func(ctx context.Context, tr *inproc.Turn) (string, error) {
		switch tr.Prompt {
		case "ask":
			r, err := tr.Call("await_input", map[string]any{"kind": "approval", "prompt": "ok?", "timeout": 3600})
			if err != nil {
				return "", err
			}
			return "answer: " + r["response"].(string), nil
		case "block":
			started <- struct{}{}
			<-ctx.Done()
			return "", ctx.Err()
		}
		return "done: " + tr.Prompt, nil
	})
	id := h.create("lead", "", "moody")
	sus := h.send(id, "ask")
	if sus.Status != "suspended" {
		t.Fatalf("ask = %+v", sus)
	}
	tokID := sus.Wait.TokenID
	res := h.send(id, "hello")
	if res.Response != "done: hello" || res.RevokedWait == nil || res.RevokedWait.TokenID != tokID ||
		res.RevokedWait.Kind != "approval" || res.AbandonedRun != "" {
		t.Fatalf("send to a suspended agent = %+v; want the revoked wait %v named", res, tokID)
	}
	if res.RevokedWait == nil {
		t.Fatalf("send result = %+v; want revoked_wait", res)
	}
	if _, err := h.c.Resume(context.Background(), id, sus.Token, "late"); codeOf(err) != protocol.CodeTokenRejected {
		t.Fatalf("resume of the revoked wait: err = %v, want code 5", err)
	}

	go func() { _, _ = h.c.Send(context.Background(), id, "block", "", "", nil) }()
	<-started
	a, _ := h.c.agent(id)
	blockedRun := look(a, func(p *projection, _ liveFlags) string { return p.Run.RunID })
	h.crash(faultfs.ProcessCrash)
	if s := h.statusOf(id); s != "interrupted_startup" {
		t.Fatalf("status after the crash = %s", s)
	}
	res = h.send(id, "again")
	if res.Response != "done: again" || res.AbandonedRun != blockedRun || res.RevokedWait != nil {
		t.Fatalf("send to an interrupted_startup agent = %+v; want abandoned_run %s", res, blockedRun)
	}
	if res.AbandonedRun != blockedRun {
		t.Fatalf("send result = %+v; want abandoned_run", res)
	}
	if res = h.send(id, "plain"); res.RevokedWait != nil || res.AbandonedRun != "" {
		t.Fatalf("ordinary send = %+v; want nothing revoked or abandoned", res)
	}
}
