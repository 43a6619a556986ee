package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/store"
	"github.com/warren-dev/warren/store/storetest"
)

// holding is a Store holding the USER inbox, with its USER log open.
type holding struct {
	s    *Store
	user store.Lease
	ulog store.Log
}

func holdUser(t *testing.T, s *Store) holding {
	t.Helper()
	ctx := context.Background()
	u, err := s.Own(ctx, store.UserID)
	if err != nil {
		t.Fatal(err)
	}
	ul, err := s.UserLog(ctx, store.LogOptions{Lease: u})
	if err != nil {
		t.Fatal(err)
	}
	return holding{s: s, user: u, ulog: ul}
}

// openAgent opens id's log under h's USER claim, recording what it hands
// its fold (replayed, then appended).
func (h holding) openAgent(t *testing.T, id string, folded *[]string) store.Log {
	t.Helper()
	ctx := context.Background()
	l, err := h.s.Own(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	lg, err := h.s.OpenLog(ctx, id, store.LogOptions{Lease: l,
		Replay: func(e eventlog.Entry) error { *folded = append(*folded, e.Event); return nil },
		OnAppend: func(es []eventlog.Entry) {
			for _, e := range es {
				*folded = append(*folded, e.Event)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	return lg
}

// wroteOne has node hold the USER inbox on base's servers and append
// event to id's log, which it leaves open.
func wroteOne(t *testing.T, base *Store, node, id, event string) (holding, store.Log) {
	t.Helper()
	h := holdUser(t, newStore(t, base.nc, node, base.o.Embedded...))
	var folded []string
	x := h.openAgent(t, id, &folded)
	if _, err := x.Append(event, nil); err != nil {
		t.Fatal(err)
	}
	return h, x
}

// events lists the events of id's log as the leader holds it, with the
// epoch of each agent.claimed.
func events(t *testing.T, s *Store, id string) string {
	t.Helper()
	es, err := s.readAll(context.Background(), Subject(id))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		if e.Event == schema.AgentClaimed {
			var d schema.AgentClaimedData
			_ = json.Unmarshal(e.Data, &d)
			out = append(out, fmt.Sprintf("claimed@%s", d.Node))
			continue
		}
		out = append(out, e.Event)
	}
	return fmt.Sprint(out)
}

// TestClaimDeferredAfterARelease: after a holder that closed its logs
// releases the USER inbox, the next holder opens a log the released one
// wrote last without appending to it; its first append carries the claim
// in the same batch, and its fold sees both.
func TestClaimDeferredAfterARelease(t *testing.T) {
	base := harness().New(t).(*Store)
	ctx := context.Background()
	id := storetest.NewID(t)
	h1, x := wroteOne(t, base, "n1", id, "e1")
	_ = x.Close()
	_ = h1.ulog.Close()
	if err := h1.user.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, released, err := h1.s.Holder(ctx, store.UserID); err != nil || !released {
		t.Fatalf("after a release with every log closed: released %v, %v", released, err)
	}
	h2 := holdUser(t, newStore(t, base.nc, "n2", base.o.Embedded...))
	var f2 []string
	x2 := h2.openAgent(t, id, &f2)
	if got := events(t, base, id); got != "[e1]" {
		t.Fatalf("after the open the log holds %s, want [e1] (no claim yet)", got)
	}
	e, err := x2.Append("e2", nil)
	if err != nil {
		t.Fatalf("the first append after a deferred claim: %v", err)
	}
	if e.Event != "e2" || e.Seq != 3 {
		t.Fatalf("the append returned %s at seq %d, want e2 at 3 (after the claim)", e.Event, e.Seq)
	}
	if got := events(t, base, id); got != "[e1 claimed@n2 e2]" {
		t.Fatalf("the log holds %s, want [e1 claimed@n2 e2]", got)
	}
	if got := fmt.Sprint(f2); got != "[e1 agent.claimed e2]" {
		t.Fatalf("the fold saw %s, want [e1 agent.claimed e2]", got)
	}
	if _, err := x2.AppendBatch([]eventlog.Record{{Event: "e3"}, {Event: "e4"}}); err != nil {
		t.Fatal(err)
	}
	if got := events(t, base, id); got != "[e1 claimed@n2 e2 e3 e4]" {
		t.Fatalf("the log holds %s, want one claim only", got)
	}
}

// TestClaimEagerAfterALapse: a holder whose USER lease lapsed (it did
// not release) may still write, so the next holder claims each log at its
// open, and the old holder's next append is refused.
func TestClaimEagerAfterALapse(t *testing.T) {
	base := harness().New(t).(*Store)
	ctx := context.Background()
	id := storetest.NewID(t)
	_, x := wroteOne(t, base, "n1", id, "e1")
	if err := base.owners.Purge(ctx, store.UserID); err != nil { // the lease lapsed and was swept
		t.Fatal(err)
	}
	claimedAtOpen(t, base, id, "[e1 claimed@n2]", x)
}

// claimedAtOpen has a new holder, n2, open id: the open must append its
// claim (the log then holds want), and the earlier holder's next append
// on old must be refused.
func claimedAtOpen(t *testing.T, base *Store, id, want string, old store.Log) {
	t.Helper()
	h2 := holdUser(t, newStore(t, base.nc, "n2", base.o.Embedded...))
	var f2 []string
	h2.openAgent(t, id, &f2)
	if got := events(t, base, id); got != want {
		t.Fatalf("after the open the log holds %s, want %s", got, want)
	}
	if _, err := old.Append("late", nil); err == nil {
		t.Fatal("the earlier holder's append was not refused")
	}
}

// TestReleaseWithALogOpenLeavesTheKey: a holder that releases the USER
// inbox with a log still open does not write the release marker (it could
// still append): its key lapses instead, and the next claim waits for it.
func TestReleaseWithALogOpenLeavesTheKey(t *testing.T) {
	base := harness().New(t).(*Store)
	ctx := context.Background()
	h1 := holdUser(t, newStore(t, base.nc, "n1", base.o.Embedded...))
	var f1 []string
	h1.openAgent(t, storetest.NewID(t), &f1)
	_ = h1.ulog.Close()
	if err := h1.user.Release(ctx); err != nil {
		t.Fatal(err)
	}
	node, released, err := h1.s.Holder(ctx, store.UserID)
	if err != nil || released || node != "n1" {
		t.Fatalf("after a release with a log open: holder %q, released %v, %v; want n1 still, to lapse", node, released, err)
	}
}

// TestClaimEagerOnAnOlderHoldersLog: after a release, a log last written
// by a holder before the released one (which never opened it) is claimed
// at its open: that older holder may still be paused, not stopped.
func TestClaimEagerOnAnOlderHoldersLog(t *testing.T) {
	base := harness().New(t).(*Store)
	ctx := context.Background()
	id := storetest.NewID(t)
	_, x := wroteOne(t, base, "n0", id, "e0")
	if err := base.owners.Purge(ctx, store.UserID); err != nil { // h0 paused; its lease lapsed
		t.Fatal(err)
	}
	h1 := holdUser(t, newStore(t, base.nc, "n1", base.o.Embedded...))
	_ = h1.ulog.Close()
	if err := h1.user.Release(ctx); err != nil {
		t.Fatal(err)
	}
	claimedAtOpen(t, base, id, "[e0 claimed@n2]", x)
}

// TestClaimDeferredAcrossCleanHandovers: a log left at rest across
// several clean handovers is opened without a claim by each next holder
// (the release markers carry the clean epochs on), until the marker's
// bound: past it the open claims the log, which makes it current again.
func TestClaimDeferredAcrossCleanHandovers(t *testing.T) {
	base := harness().New(t).(*Store)
	ctx := context.Background()
	id := storetest.NewID(t)
	h, x := wroteOne(t, base, "n0", id, "e0")
	_ = x.Close()
	for i := 1; i <= cleanEpochsMax+1; i++ {
		_ = h.ulog.Close()
		if err := h.user.Release(ctx); err != nil {
			t.Fatal(err)
		}
		h = holdUser(t, newStore(t, base.nc, fmt.Sprint("n", i), base.o.Embedded...))
		var fi []string
		xi := h.openAgent(t, id, &fi)
		_ = xi.Close()
		want := "[e0]"
		if i == cleanEpochsMax+1 {
			want = fmt.Sprintf("[e0 claimed@n%d]", i)
		}
		if got := events(t, base, id); got != want {
			t.Fatalf("handover %d: the log holds %s, want %s", i, got, want)
		}
	}
}

// TestParseEpochs: a marker's clean epochs, and anything malformed naming
// none.
func TestParseEpochs(t *testing.T) {
	for in, want := range map[string]string{
		"":      "[]",
		"7":     "[7]",
		"9,7,3": "[9 7 3]",
		"9,x":   "[]",
		"0":     "[]",
		"9,,7":  "[]",
		"-1":    "[]",
		"1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17": "[]",
	} {
		if got := fmt.Sprint(parseEpochs(in)); got != want {
			t.Errorf("parseEpochs(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestReleaseSealsTheEpoch: once a holder released the USER inbox, no log
// opens under its claim any more, even with an agent lease taken before
// the release (an open under way when the daemon stopped): the marker
// said it writes no more.
func TestReleaseSealsTheEpoch(t *testing.T) {
	base := harness().New(t).(*Store)
	ctx := context.Background()
	h := holdUser(t, newStore(t, base.nc, "n1", base.o.Embedded...))
	lease, err := h.s.Own(ctx, storetest.NewID(t))
	if err != nil {
		t.Fatal(err)
	}
	_ = h.ulog.Close()
	if err := h.user.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, released, err := h.s.Holder(ctx, store.UserID); err != nil || !released {
		t.Fatalf("the release was not written: released %v, %v", released, err)
	}
	if _, err := h.s.OpenLog(ctx, lease.ID(), store.LogOptions{Lease: lease}); !errors.Is(err, store.ErrOwned) {
		t.Fatalf("an open after the release: %v, want ErrOwned", err)
	}
}
