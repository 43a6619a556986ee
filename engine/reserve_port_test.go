package engine

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/warren-dev/warren/inbox"
)

// The reservations (reserve.go) on their own, with a recipient's inbox of
// the test's. (This test replaces the former package reserve's.)

var errReserveFull = errors.New("full")

// reserveInbox is a recipient's inbox for the test: the ids in it.
type reserveInbox struct {
	mu  sync.Mutex
	ids map[string]bool
}

func (ib *reserveInbox) view(reserved func(has func(id string) bool) (int, int64)) (int, int64, int, int64) {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	rn, rb := reserved(func(id string) bool { return ib.ids[id] })
	return len(ib.ids), 0, rn, rb
}

// TestReserveHoldsTheLimitUnderConcurrency: concurrent checks against an
// inbox with room for 3 reserve exactly 3, counting the ones checked and
// not yet landed; a released reservation frees its room; a message
// checked twice holds one place.
func TestReserveHoldsTheLimitUnderConcurrency(t *testing.T) {
	var s reservations
	ib := &reserveInbox{ids: map[string]bool{}}
	landed := func(_, id string) bool { ib.mu.Lock(); defer ib.mu.Unlock(); return ib.ids[id] }
	check := func(n int, _ int64, _, _ int64) error {
		if n+1 > 3 {
			return errReserveFull
		}
		return nil
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var ok []string
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			m := inbox.Message{ID: fmt.Sprint("m", i), Recipient: "r", Payload: "x"}
			if err := s.Reserve(m, ib.view, landed, check); err == nil {
				mu.Lock()
				ok = append(ok, m.ID)
				mu.Unlock()
			} else if !errors.Is(err, errReserveFull) {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	if len(ok) != 3 || s.Len() != 3 {
		t.Fatalf("%d reserved (%d held); want 3", len(ok), s.Len())
	}
	if err := s.Reserve(inbox.Message{ID: ok[0], Recipient: "r"}, ib.view, landed, check); err != nil {
		t.Fatalf("a reserved message checked again: %v; want it to pass on its reservation", err)
	}
	// One lands (in the inbox, reservation not yet released): still full.
	ib.mu.Lock()
	ib.ids[ok[0]] = true
	ib.mu.Unlock()
	if err := s.Reserve(inbox.Message{ID: "late", Recipient: "r"}, ib.view, landed, check); !errors.Is(err, errReserveFull) {
		t.Fatalf("a landed message counted once: %v; want full", err)
	}
	s.Release(ok[1])
	if err := s.Reserve(inbox.Message{ID: "late", Recipient: "r"}, ib.view, landed, check); err != nil {
		t.Fatalf("after a release: %v; want room", err)
	}
	// The inbox fills up meanwhile: a reserved message still passes on
	// its reservation (it holds its place).
	ib.mu.Lock()
	ib.ids["x1"], ib.ids["x2"] = true, true
	ib.mu.Unlock()
	if err := s.Reserve(inbox.Message{ID: ok[2], Recipient: "r"}, ib.view, landed, check); err != nil {
		t.Fatalf("a reserved message checked again, the inbox full of others: %v; want it to pass on its reservation", err)
	}
}
