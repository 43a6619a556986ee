package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/session"
)

// sessionRenames counts the renames onto an agent's session.json (one per
// atomic rewrite) among ops.
func sessionRenames(ops []faultfs.Op, id string) int {
	n := 0
	for _, op := range ops {
		if op.Kind == faultfs.OpRename && strings.HasSuffix(op.To, id+"/"+session.FileName) {
			n++
		}
	}
	return n
}

func TestSessionSnapshotWritesAreCoalesced(t *testing.T) {
	// A delay longer than the test: the creation and two turns change the
	// session five times, and nothing is written until Close. Close has the
	// background writer write the latest state once, then evicts the live
	// session, which writes it again with the provider's blob.
	h := newHarness(t, func(h *harness) { h.saveDelay = time.Hour })
	start := len(h.fs.Ops())
	id := h.create("a", "", "echo")
	for _, msg := range []string{"one", "two"} {
		if res := h.send(id, msg); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	if n := sessionRenames(h.fs.Ops()[start:], id); n != 0 {
		t.Fatalf("session.json written %d times within the delay, want 0", n)
	}
	mid := len(h.fs.Ops())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := sessionRenames(h.fs.Ops()[mid:], id); n != 2 {
		t.Fatalf("Close wrote session.json %d times, want 2 (the coalesced snapshot, the eviction)", n)
	}
	s, err := session.NewStore(h.fs, "/home/agents").Load(id)
	if err != nil {
		t.Fatal(err)
	}
	if s.State != session.StateIdle || s.Run != nil {
		t.Fatalf("session.json after Close: state %s run %+v, want idle with no run", s.State, s.Run)
	}
	h.start() // the harness cleanup closes the core
}

func TestSessionSnapshotWrittenWithoutDelay(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.saveDelay = -1 })
	id := h.create("a", "", "echo")
	if res := h.send(id, "one"); res.Err != nil {
		t.Fatal(res.Err)
	}
	// The background writer writes while the core runs: wait for its
	// latest write to land, driven by the core's own wait group.
	h.c.snaps.Wait()
	s, err := session.NewStore(h.fs, "/home/agents").Load(id)
	if err != nil {
		t.Fatal(err)
	}
	if s.State != session.StateIdle {
		t.Fatalf("session.json state %s, want idle", s.State)
	}
}

func TestStaleProviderBlobIsNotRestoredAfterACrash(t *testing.T) {
	// One slot, so each turn of one agent evicts the other. The write that
	// clears a's blob after its restore is held back (a long snapshot
	// delay) and lost in the crash: session.json still holds the blob of
	// a's first turn when the daemon restarts. Restoring it would make a
	// forget its later turns.
	h := newHarness(t, func(h *harness) {
		h.saveDelay = time.Hour
		h.cfg.Pools["default"] = 1
	})
	h.prov.Register("count", func(_ context.Context, t *inproc.Turn) (string, error) {
		return fmt.Sprint(len(t.History)), nil
	})
	a := h.create("a", "", "count")
	b := h.create("b", "", "count")
	for i, step := range []struct{ id, want string }{{a, "0"}, {b, "0"}, {a, "1"}, {a, "2"}} {
		if res := h.send(step.id, "turn"); res.Err != nil || res.Response != step.want {
			t.Fatalf("step %d: %+v, want response %s", i, res, step.want)
		}
	}
	s, err := session.NewStore(h.fs, "/home/agents").Load(a)
	if err != nil || len(s.ProviderState) == 0 {
		t.Fatalf("setup: session.json of a should still hold the old blob: %v", err)
	}
	h.crash(faultfs.ProcessCrash)
	if res := h.send(a, "turn"); res.Err != nil || res.Response != "3" {
		t.Fatalf("after the crash a's turn saw history %+v, want 3 earlier turns", res)
	}
}
