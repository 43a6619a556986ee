package engine

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
	w := &snapshotWriter{
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
	var s sessionSnap
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

// A deferred loader runs once, at the first read or change (or Load), and
// the change applies to what it loaded; Set drops a loader not run yet.
func TestDeferLoadsOnceAtFirstUse(t *testing.T) {
	now := func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }
	loads := 0
	loader := func() *session.Session {
		loads++
		return &session.Session{ID: "a", State: session.StateSuspended, ProviderState: []byte("blob")}
	}

	var s sessionSnap
	s.Defer(loader)
	if loads != 0 {
		t.Fatalf("Defer ran the loader")
	}
	s.Change("a", now, func(x *session.Session) { x.State = session.StateIdle })
	g := s.Get()
	if loads != 1 || g.State != session.StateIdle || string(g.ProviderState) != "blob" {
		t.Fatalf("after a change: %d loads, snapshot %+v; want one load and the change on the loaded blob", loads, g)
	}
	s.Load()
	_ = s.Get()
	if loads != 1 {
		t.Fatalf("the loader ran %d times; want once", loads)
	}

	var l sessionSnap
	l.Defer(loader)
	l.Load()
	if loads != 2 || l.Get().State != session.StateSuspended {
		t.Fatalf("Load: %d loads, snapshot %+v", loads, l.Get())
	}

	var d sessionSnap
	d.Defer(loader)
	d.Set(&session.Session{ID: "a", State: session.StateRunning})
	if g := d.Get(); loads != 2 || g.State != session.StateRunning {
		t.Fatalf("Set after Defer: %d loads, snapshot %+v; want the set one and no load", loads, g)
	}
}

// A flush of a snapshot nobody read writes what its loader read (the
// writer never writes a session.json it has not loaded), and a snapshot
// with nothing at all writes nothing.
func TestFlushLoadsFirst(t *testing.T) {
	var saved []*session.Session
	w := &snapshotWriter{Save: func(s *session.Session) error { saved = append(saved, s); return nil },
		Delay: func() {}, Now: time.Now}
	var s sessionSnap
	s.Defer(func() *session.Session { return &session.Session{ID: "a", State: session.StateSuspended} })
	if err := w.Flush(&s); err != nil || len(saved) != 1 || saved[0].State != session.StateSuspended {
		t.Fatalf("flush: err %v, saved %+v", err, saved)
	}
	var none sessionSnap
	if err := w.Flush(&none); err != nil || len(saved) != 1 {
		t.Fatalf("flush of nothing: err %v, %d saves", err, len(saved))
	}
}
