package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/config"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/provider/scripted"
)

// scriptedHarness is a harness whose agents are real python3 subprocesses.
func scriptedHarness(t *testing.T, setup ...func(h *harness)) (*harness, string) {
	t.Helper()
	helper, err := filepath.Abs("../provider/scripted/python")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("WARREN_TEST_HELPER", helper)
	dir, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, fs: faultfs.NewMem(), prov: inproc.New("inproc", inproc.Options{}), cfg: config.Default()}
	// The scripts find the helper library through this variable.
	h.cfg.Providers["scripted"] = config.ProviderConfig{EnvPass: []string{"WARREN_TEST_HELPER"}}
	for _, f := range setup {
		f(h)
	}
	sp := scripted.New(scripted.Options{TurnTimeout: 30 * time.Second, Logger: hclog.NewNullLogger()})
	h.extra = map[string]provider.Provider{"scripted": sp}
	h.start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = h.c.Close(ctx)
	})
	return h, dir
}

func (h *harness) createScripted(name, parent, script string) string {
	h.t.Helper()
	id, err := h.c.CreateAgent(context.Background(), CreateSpec{Name: name, ParentID: parent, Provider: "scripted", Model: script})
	if err != nil {
		h.t.Fatalf("create %s: %v", name, err)
	}
	return id
}

func TestScriptedTeamSpawnsMessagesBroadcastsAndCompletes(t *testing.T) {
	h, dir := scriptedHarness(t)
	root := h.createScripted("root", "", filepath.Join(dir, "root.py"))
	if res := h.send(root, "start"); res.Err != nil || res.Response != "spawned 3" {
		t.Fatalf("start: %+v", res)
	}
	h.until("three workers exist and bootstrapped", func() bool {
		n := 0
		for _, id := range h.c.tree.Children(root) {
			if h.count(id, "turn.complete") >= 1 {
				n++
			}
		}
		return n == 3
	})
	if res := h.send(root, "kick"); res.Err != nil {
		t.Fatalf("kick: %+v", res)
	}
	h.until("each worker has two bootstrapped leaves", func() bool {
		for _, w := range h.c.tree.Children(root) {
			kids := h.c.tree.Children(w)
			if len(kids) != 2 {
				return false
			}
			for _, l := range kids {
				if h.count(l, "turn.complete") < 1 {
					return false
				}
			}
		}
		return true
	})
	h.quiet()
	workers := h.c.tree.Children(root)
	if res := h.send(root, "collect"); res.Err != nil {
		t.Fatalf("collect: %+v", res)
	}
	defer func() {
		if t.Failed() {
			for _, w := range workers {
				for _, e := range h.entries(w) {
					t.Logf("%s %d %s %s", w[:4], e.Seq, e.Event, e.Data)
				}
			}
		}
	}()
	h.until("the USER inbox got the report", func() bool { return len(h.c.UserPending(context.Background())) == 1 })
	h.quiet()
	if got := h.c.UserPending(context.Background())[0].Payload; got != "all workers done: w1,w2,w3" {
		t.Fatalf("USER got %q", got)
	}
	// Every broadcast reached each sibling once: each worker's log holds
	// exactly two "hello" messages (one from each sibling).
	hello := regexp.MustCompile(`"payload":"hello"`)
	for _, w := range workers {
		n := 0
		for _, e := range h.entries(w) {
			if e.Event == "message.enqueued" && hello.Match(e.Data) {
				n++
			}
		}
		if n != 2 {
			t.Fatalf("worker %s received %d hellos, want 2", w, n)
		}
	}
	// The final tree: only the root; its inbox is empty; the results came
	// back as responses.
	h.until("the completed workers are gone", func() bool { return len(h.c.List()) == 1 })
	if views := h.c.List(); len(views) != 1 || views[0].ID != root || views[0].Pending != 0 {
		t.Fatalf("final agents = %+v", views)
	}
	responses := 0
	for _, e := range h.entries(root) {
		if e.Event == "message.enqueued" && strings.Contains(string(e.Data), `"kind":"response"`) {
			responses++
		}
	}
	if responses != 3 {
		t.Fatalf("root received %d responses, want 3", responses)
	}
}

// counter.py counts its turns (its state comes back through history replay)
// and reports each count to USER through a tool call.
const counterScript = `import os, sys
sys.path.insert(0, os.environ["WARREN_TEST_HELPER"])
from warren_script import read_turn, call_tool, done
n = 0
while True:
    msg = read_turn()
    n += 1
    call_tool("send_message", recipient="USER", text="%s count %d" % (msg, n))
    done("count %d" % n)
`

func TestScriptedHistoryReplayAcrossEvictionAndCrash(t *testing.T) {
	h, _ := scriptedHarness(t, func(h *harness) { h.cfg.Pools = map[string]int{"default": 4, "scripted": 1} })
	script := filepath.Join(t.TempDir(), "counter.py")
	if err := os.WriteFile(script, []byte(counterScript), 0o600); err != nil {
		t.Fatal(err)
	}
	ids := []string{h.createScripted("a", "", script), h.createScripted("b", "", script)}
	for round := 1; round <= 3; round++ {
		for i, id := range ids {
			want := fmt.Sprintf("count %d", round)
			if res := h.send(id, fmt.Sprint("r", i)); res.Response != want {
				t.Fatalf("round %d agent %d: %+v, want %q (history lost across eviction)", round, i, res, want)
			}
		}
		if round == 2 {
			h.crash(faultfs.PowerLoss) // never-evicted and evicted sessions alike must come back
		}
	}
	if n := h.count(ids[0], "suspend.result"); n < 2 {
		t.Fatalf("one scripted slot: expected evictions, got %d", n)
	}
	if got := len(h.c.UserPending(context.Background())); got != 6 {
		t.Fatalf("USER got %d reports; tool calls must keep working after a restart (want 6)", got)
	}
}
