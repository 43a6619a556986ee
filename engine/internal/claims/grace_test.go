package claims

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/warren-dev/warren/store"
)

// An id found held by another daemon is claimed only once its lease has
// stayed lapsed for the grace; a holder seen again resets the count; an
// id never found held is claimed at once.
func TestLapsedLeaseGrace(t *testing.T) {
	o := newOwner("a")
	now := time.Unix(1000, 0)
	holder := map[string]string{"a": "n1"}
	released := map[string]bool{}
	s := New(Options{Owner: o, Ctx: context.Background(), Grace: 2 * time.Second, Now: func() time.Time { return now },
		Holder: func(_ context.Context, id string) (string, bool, error) { return holder[id], released[id], nil }})
	if _, err := s.Own("fresh", 0); err != nil {
		t.Fatalf("an id never found held: %v", err)
	}
	if _, err := s.Own("a", 0); !errors.Is(err, store.ErrOwned) {
		t.Fatalf("a held id: %v", err)
	}
	// The holder's key lapses (an election of the owners bucket).
	delete(o.others, "a")
	holder["a"] = ""
	calls := o.calls["a"]
	for _, step := range []time.Duration{0, time.Second, 900 * time.Millisecond} {
		now = now.Add(step)
		if _, err := s.Own("a", 0); !errors.Is(err, store.ErrOwned) {
			t.Fatalf("claimed %s into the grace: %v", step, err)
		}
	}
	if o.calls["a"] != calls {
		t.Fatal("the store was asked to claim during the grace")
	}
	// The holder writes its key back: the grace starts over when it lapses again.
	holder["a"] = "n1"
	if _, err := s.Own("a", 0); !errors.Is(err, store.ErrOwned) {
		t.Fatalf("a key written back: %v", err)
	}
	holder["a"] = ""
	now = now.Add(10 * time.Second)
	if _, err := s.Own("a", 0); !errors.Is(err, store.ErrOwned) {
		t.Fatalf("the first sight of a lapse after the holder came back: %v", err)
	}
	now = now.Add(2 * time.Second)
	if _, err := s.Own("a", 0); err != nil {
		t.Fatalf("lapsed past the grace: %v", err)
	}
	// An id found held whose holder then released it (a clean stop) is
	// claimed at once.
	o.others["b"], holder["b"] = true, "n1"
	if _, err := s.Own("b", 0); !errors.Is(err, store.ErrOwned) {
		t.Fatalf("a held id: %v", err)
	}
	delete(o.others, "b")
	holder["b"], released["b"] = "", true
	if _, err := s.Own("b", 0); err != nil {
		t.Fatalf("a released id: %v, want claimed at once", err)
	}
}
