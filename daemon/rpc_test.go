package daemon

import (
	"context"
	"fmt"
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
