package claims

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/warren-dev/warren/store"
)

type fakeLease struct {
	id       string
	lost     chan struct{}
	released bool
}

func (l *fakeLease) ID() string                    { return l.id }
func (l *fakeLease) Epoch() uint64                 { return 1 }
func (l *fakeLease) Lost() <-chan struct{}         { return l.lost }
func (l *fakeLease) Expires() time.Time            { return time.Time{} }
func (l *fakeLease) Release(context.Context) error { l.released = true; return nil }

// fakeOwner grants claims on ids nobody else holds.
type fakeOwner struct {
	mu     sync.Mutex
	others map[string]bool // held by another daemon
	calls  map[string]int
	leases map[string]*fakeLease
}

func (o *fakeOwner) Own(_ context.Context, id string) (store.Lease, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls[id]++
	if o.others[id] {
		return nil, store.ErrOwned
	}
	l := &fakeLease{id: id, lost: make(chan struct{})}
	o.leases[id] = l
	return l, nil
}

func newOwner(others ...string) *fakeOwner {
	o := &fakeOwner{others: map[string]bool{}, calls: map[string]int{}, leases: map[string]*fakeLease{}}
	for _, id := range others {
		o.others[id] = true
	}
	return o
}

// A held claim is reused until it is lost; its loss is reported once and
// the next Own claims again; Drop and ReleaseAll give claims back.
func TestOwnReusesUntilLost(t *testing.T) {
	o := newOwner()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lost := make(chan string, 1)
	s := New(Options{Owner: o, Ctx: ctx, Lost: func(id string) { lost <- id }})
	l1, err := s.Own("a", 0)
	if err != nil {
		t.Fatal(err)
	}
	if l2, _ := s.Own("a", time.Second); l2 != l1 || o.calls["a"] != 1 {
		t.Fatalf("second Own: %d claims made, want the held one reused", o.calls["a"])
	}
	close(o.leases["a"].lost)
	if id := <-lost; id != "a" {
		t.Fatalf("lost %q, want a", id)
	}
	if _, err := s.Own("a", 0); err != nil || o.calls["a"] != 2 {
		t.Fatalf("Own after a loss: %v, %d claims; want a new claim", err, o.calls["a"])
	}
	s.Drop(context.Background(), "a")
	if s.Holds("a") || !o.leases["a"].released {
		t.Fatal("Drop: the claim is still held or was not released")
	}
	if _, err := s.Own("b", 0); err != nil {
		t.Fatal(err)
	}
	s.ReleaseAll(context.Background())
	if s.Holds("b") || !o.leases["b"].released {
		t.Fatal("ReleaseAll left a claim")
	}
}

// Claimable takes the agents nobody holds, skips those known, leaves those
// held elsewhere, and gives back a child whose parent is held elsewhere.
func TestClaimableLeavesSubtreesToTheirParentsDaemon(t *testing.T) {
	o := newOwner("p2")
	s := New(Options{Owner: o, Ctx: context.Background()})
	parents := map[string]string{"k1": "p1", "k2": "p2", "k3": "gone"}
	known := func(id string) bool { return id == "mine" || s.Holds(id) }
	take, elsewhere := s.Claimable(context.Background(), []string{"mine", "p1", "k1", "p2", "k2", "k3"}, 0, known,
		func(id string) string { return parents[id] })
	if got, want := take, []string{"p1", "k1", "k3"}; !equal(got, want) {
		t.Fatalf("take %v, want %v", got, want)
	}
	if len(elsewhere) != 2 || s.Holds("k2") || !o.leases["k2"].released {
		t.Fatalf("elsewhere %v; want p2 and k2, k2's claim given back", elsewhere)
	}
}

// On a cluster, StandBy waits for a held claim until its context ends.
func TestStandByEndsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s := New(Options{Owner: newOwner("USER"), Ctx: ctx})
	cancel()
	if _, err := s.StandBy("USER", Standby{Clustered: true, Every: time.Millisecond}); !errors.Is(err, context.Canceled) {
		t.Fatalf("StandBy after cancel: %v", err)
	}
	if _, err := s.StandBy("USER", Standby{Every: time.Millisecond}); !errors.Is(err, store.ErrOwned) {
		t.Fatalf("StandBy on a local store: %v, want the claim's error at once", err)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A dropped or released claim's watch ends with it: no goroutine is left
// parked on a lease the Set no longer holds (the watches run in a
// synctest bubble, which fails the test if any is still blocked when the
// test function returns).
func TestDropEndsTheWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := newOwner()
		s := New(Options{Owner: o, Ctx: context.Background()})
		for _, id := range []string{"a", "b", "c"} {
			if _, err := s.Own(id, 0); err != nil {
				t.Fatal(err)
			}
		}
		s.Drop(context.Background(), "a")
		synctest.Wait()
		if !o.leases["a"].released || s.Holds("a") {
			t.Fatal("a dropped claim was not released")
		}
		s.ReleaseAll(context.Background())
		synctest.Wait()
		if !o.leases["b"].released || !o.leases["c"].released {
			t.Fatal("ReleaseAll did not release every claim")
		}
	})
}
