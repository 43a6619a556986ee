package snapsave

import (
	"sync"
	"testing"
	"time"

	"github.com/warren-dev/warren/session"
)

// Changes made while a writer waits are written once, by that writer, and
// the last write holds the latest snapshot; after runs after each write.
func TestUpdateCoalescesWrites(t *testing.T) {
	var mu sync.Mutex
	var saved []session.State
	release := make(chan struct{})
	delays := 0
	w := &Writer{
		Save: func(s *session.Session) error {
			mu.Lock()
			saved = append(saved, s.State)
			mu.Unlock()
			return nil
		},
		Delay: func() {
			mu.Lock()
			delays++
			first := delays == 1
			mu.Unlock()
			if first {
				<-release
			}
		},
		Now: func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) },
	}
	var s Snapshot
	afters := 0
	after := func() { mu.Lock(); afters++; mu.Unlock() }
	w.Update(&s, "a", func(x *session.Session) { x.State = session.StateRunning }, after)
	w.Update(&s, "a", func(x *session.Session) { x.State = session.StateSuspended }, after)
	w.Update(&s, "a", func(x *session.Session) { x.State = session.StateIdle }, after)
	close(release)
	w.Wait()
	if len(saved) != 1 || saved[0] != session.StateIdle || afters != 1 {
		t.Fatalf("saved %v with %d afters; want one write of the latest state (idle)", saved, afters)
	}
	if g := s.Get(); g.ID != "a" || g.State != session.StateIdle || !g.CreatedAt.Equal(w.Now()) {
		t.Fatalf("snapshot %+v", g)
	}
	// A change while the writer runs (between its reset and its end)
	// makes it write again.
	block, writing := make(chan struct{}), make(chan struct{})
	w.Delay = func() {}
	w.Save = func(x *session.Session) error {
		mu.Lock()
		saved = append(saved, x.State)
		n := len(saved)
		mu.Unlock()
		if n == 2 {
			close(writing)
			<-block
		}
		return nil
	}
	w.Update(&s, "a", func(x *session.Session) { x.State = session.StateRunning }, after)
	<-writing
	w.Update(&s, "a", func(x *session.Session) { x.State = session.StateIdle }, after)
	close(block)
	w.Wait()
	if len(saved) != 3 || saved[2] != session.StateIdle {
		t.Fatalf("saved %v; want a second write with the change made during the first", saved)
	}
}
