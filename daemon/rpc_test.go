package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/session"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warren-dev/warren/engine"
	"github.com/warren-dev/warren/protocol"
)

// TestAgentLogRPCPaged: agent.log over the socket API honours limit, says
// where the next page starts, and an unpaged call is bounded by the
// default page size.
func TestAgentLogRPCPaged(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.noWake = true })
	root := h.create("root", "", "echo")
	h.create("kid", root, "echo")
	for i := 0; i < engine.DefaultPageLimit+20; i++ {
		h.tool(root, "send_message", map[string]any{"recipient": "kid", "text": fmt.Sprint(i)})
	}
	all := h.entries(root)
	rpc := &handler{c: h.c}
	call := func(p map[string]any) map[string]any {
		t.Helper()
		res, err := rpc.agentLog(context.Background(), protocol.Params(p), nil)
		if err != nil {
			t.Fatal(err)
		}
		return res.(map[string]any)
	}
	var seqs []uint64
	since := uint64(0)
	for pages := 0; pages <= len(all); pages++ {
		res := call(map[string]any{"agent_id": root, "since_seq": since, "limit": 50})
		evs := res["events"].([]any)
		if len(evs) > 50 {
			t.Fatalf("a page of %d events with limit 50", len(evs))
		}
		if len(evs) == 0 {
			break
		}
		for _, e := range evs {
			seqs = append(seqs, uint64(e.(map[string]any)["seq"].(int64)))
		}
		since = uint64(res["next_seq"].(int64))
	}
	if len(seqs) != len(all) || seqs[0] != 1 || seqs[len(seqs)-1] != all[len(all)-1].Seq {
		t.Fatalf("pages gave %d events, want %d, each once", len(seqs), len(all))
	}
	unpaged := call(map[string]any{"agent_id": root})
	if n := len(unpaged["events"].([]any)); n != engine.DefaultPageLimit || unpaged["more"] != true {
		t.Fatalf("an unpaged call returned %d of %d events (more=%v), want the default page of %d", n, len(all), unpaged["more"], engine.DefaultPageLimit)
	}
	if _, err := rpc.agentLog(context.Background(), protocol.Params{"agent_id": root, "limit": -1}, nil); codeOf(err) != protocol.CodeInvalid {
		t.Fatalf("limit -1: %v, want code 2", err)
	}
}

func TestCreateCwdMustBeAnExistingAbsoluteDirectory(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := checkCwd(""); err != nil {
		t.Fatalf("empty cwd (the daemon's) refused: %v", err)
	}
	if err := checkCwd(dir); err != nil {
		t.Fatalf("existing directory refused: %v", err)
	}
	for cwd, want := range map[string]string{
		"rel/dir":                     "not an absolute path",
		filepath.Join(dir, "missing"): "no such file",
		file:                          "not a directory",
	} {
		err := checkCwd(cwd)
		if codeOf(err) != protocol.CodeInvalid || !strings.Contains(err.Error(), want) {
			t.Errorf("checkCwd(%q) = %v, want code 2 saying %q", cwd, err, want)
		}
	}
}

// agent.list pages with limit, next and after, through the live agents
// and then, with all, the terminated ones; each agent once (issue 31, D5).
func TestAgentListRPCPaged(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.noWake = true })
	root := h.create("root", "", "echo")
	var kids []string
	for i := range 7 {
		kids = append(kids, h.create(fmt.Sprint("k", i), root, "echo"))
	}
	for _, id := range kids[:3] {
		if err := h.c.Terminate(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	}
	rpc := &handler{c: h.c}
	seen := map[string]int{}
	after, pages := "", 0
	for {
		p := protocol.Params{"all": true, "limit": 2}
		if after != "" {
			p["after"] = after
		}
		res, err := rpc.list(context.Background(), p, nil)
		if err != nil {
			t.Fatal(err)
		}
		m := res.(map[string]any)
		page := m["agents"].([]any)
		if len(page) > 2 {
			t.Fatalf("a page of %d agents with limit 2", len(page))
		}
		for _, a := range page {
			seen[a.(map[string]any)["agent_id"].(string)]++
		}
		pages++
		next, _ := m["next"].(string)
		if next == "" {
			break
		}
		after = next
		if pages > 20 {
			t.Fatal("the pages never end")
		}
	}
	if len(seen) != 8 {
		t.Fatalf("the pages listed %d agents, want 8 (5 live, 3 terminated)", len(seen))
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("%s listed %d times", id, n)
		}
	}
	if res, err := rpc.list(context.Background(), protocol.Params{}, nil); err != nil || len(res.(map[string]any)["agents"].([]any)) != 5 || res.(map[string]any)["next"] != nil {
		t.Fatalf("an unpaged list: %v %v, want the 5 live agents in one page", res, err)
	}
}

// A completed turn whose response, quoted as JSON, would not fit a reply
// frame is answered by reference to its turn.complete entry, never as a
// failure (issue 31, D13: the client was told "reply larger than the
// frame" for a turn that completed, and a retry ran it twice).
func TestLargeResponseIsAnsweredByReference(t *testing.T) {
	big := strings.Repeat("\x01", 3<<20) // 3 MiB, 18 MiB quoted in JSON
	h := newHarness(t, func(h *harness) {
		h.noWake = true
		h.prov.Register("big", func(context.Context, *inproc.Turn) (string, error) { return big, nil })
	})
	id := h.create("a", "", "big")
	rpc := &handler{c: h.c}
	res, err := rpc.send(context.Background(), protocol.Params{"agent_id": id, "message": "go"}, nil)
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	m := res.(map[string]any)
	ref, ok := m["response_ref"].(map[string]any)
	if !ok || m["response"] != nil || m["response_bytes"] != len(big) || m["status"] != session.StatusIdle {
		t.Fatalf("reply %v; want the response by reference, not inline", m)
	}
	if b, err := json.Marshal(m); err != nil || len(b) > 4096 {
		t.Fatalf("the reply is %d bytes quoted (%v); want a small one", len(b), err)
	}
	seq := ref["seq"].(uint64)
	var found bool
	for _, e := range h.entries(id) {
		if e.Seq == seq && e.Event == "turn.complete" {
			var d struct{ Response string }
			if err := json.Unmarshal(e.Data, &d); err != nil || d.Response != big {
				t.Fatalf("turn.complete at seq %d does not hold the response (%v)", seq, err)
			}
			found = true
		}
	}
	if !found || ref["agent_id"] != id {
		t.Fatalf("response_ref %v names no turn.complete of the agent", ref)
	}
	// A small response stays inline.
	h.prov.Register("small", func(context.Context, *inproc.Turn) (string, error) { return "ok", nil })
	id2 := h.create("b", "", "small")
	res, err = rpc.send(context.Background(), protocol.Params{"agent_id": id2, "message": "go"}, nil)
	if err != nil || res.(map[string]any)["response"] != "ok" {
		t.Fatalf("small reply %v %v", res, err)
	}
}

// TestIssue32ParamsAreChecked: inbox.list's peek and wait_s, agent.resume's
// recursive and all, daemon.shutdown's drain_s take what SPEC 8.1 says and
// refuse the rest with code 2 naming the param; a peek leaves the message,
// a drain takes it.
func TestIssue32ParamsAreChecked(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.noWake = true })
	root := h.create("root", "", "echo")
	rpc := &handler{c: h.c}
	ctx := context.Background()
	for _, bad := range []struct {
		call  func() error
		param string
	}{
		{func() error { _, err := rpc.inboxList(ctx, protocol.Params{"wait_s": -1}, nil); return err }, "wait_s"},
		{func() error { _, err := rpc.inboxList(ctx, protocol.Params{"wait_s": 7200}, nil); return err }, "wait_s"},
		{func() error { _, err := rpc.inboxList(ctx, protocol.Params{"peek": "yes"}, nil); return err }, "peek"},
		{func() error {
			_, err := rpc.resume(ctx, protocol.Params{"agent_id": root, "recursive": true, "token_id": "t"}, nil)
			return err
		}, "token"},
		{func() error { _, err := rpc.resume(ctx, protocol.Params{"all": 1}, nil); return err }, "all"},
		{func() error { _, err := rpc.shutdownM(ctx, protocol.Params{"drain_s": -5}, nil); return err }, "drain_s"},
	} {
		err := toRPCError(bad.call())
		if err == nil || err.Code != protocol.CodeInvalid || !strings.Contains(err.Message, bad.param) {
			t.Errorf("want code 2 naming %s, got %v", bad.param, err)
		}
	}
	h.tool(root, "send_message", map[string]any{"recipient": "USER", "text": "hello"})
	for i, peek := range []bool{true, true, false} {
		res, err := rpc.inboxList(ctx, protocol.Params{"peek": peek, "wait_s": 1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if msgs := res.(map[string]any)["messages"].([]any); len(msgs) != 1 {
			t.Fatalf("call %d (peek %v): %d messages", i, peek, len(msgs))
		}
	}
	res, err := rpc.inboxList(ctx, protocol.Params{"peek": true}, nil)
	if err != nil || len(res.(map[string]any)["messages"].([]any)) != 0 {
		t.Fatalf("after the drain: %v, %v", res, err)
	}
	runs, err := rpc.resume(ctx, protocol.Params{"all": true}, nil)
	if err != nil || len(runs.(map[string]any)["runs"].([]any)) != 0 {
		t.Fatalf("resume all with nothing interrupted: %v, %v", runs, err)
	}
}
