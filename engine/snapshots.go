package engine

import (
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/session"
)

// The snapshots keep each agent's session.json snapshot in memory and
// writes it behind the log (docs/DECISIONS.md). The log is the authority,
// so the snapshot is written off the acknowledgement path: a per-agent
// writer waits a delay after a change (the snapshotWriter's Delay, cut short when
// the engine stops), then writes the latest state, and repeats while
// changes came during the wait or the write. A busy agent's snapshot is
// written about once per delay rather than twice per turn. A failed save
// is logged: the log can rebuild session.json.
//
// # Goroutines and locks
//
// Update starts, at most once at a time per agent, a writer goroutine of
// the snapshotWriter's own; Wait waits for them all (the engine's Close, after it
// has cut their delay short). A sessionSnap has two mutexes: a leaf guarding
// the snapshot and the writer's flags, taken briefly and never across a
// call out, so a sessionSnap may be read under the caller's locks (the engine
// reads it under the record's lock); and the write lock, held across one
// write so that writes of one agent are serialised and an older snapshot
// never lands after a newer one.
//
// # Reading session.json late
//
// A recovery does not read every agent's session.json before the daemon
// serves (10,000 small files cost about a second from a cold cache): it
// gives the sessionSnap a loader (Defer), which runs once, under the leaf
// lock, the first time the snapshot is read or changed, and the scrub
// after recovery runs the loaders left (Load). The loader reads the file
// and repairs it (load.go); it takes no lock of the engine, so
// holding the leaf lock across it keeps the order above. Nothing writes
// session.json before its loader ran: every write goes through this
// sessionSnap, which loads first.

// sessionSnap is one agent's latest session.json, in memory. The zero value
// holds none.
type sessionSnap struct {
	mu     sync.Mutex
	sess   *session.Session
	load   func() *session.Session // not run yet (Defer)
	saving bool                    // a writer runs
	dirty  bool                    // the snapshot changed while it waited or wrote
	write  sync.Mutex
}

// Get returns the latest snapshot (nil: none yet). The caller must not
// change it: every change makes a new one.
func (s *sessionSnap) Get() *session.Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loaded()
	return s.sess
}

// Set replaces the snapshot without writing it (it is on disk already, or
// is written by the next flush); a deferred loader is dropped.
func (s *sessionSnap) Set(sess *session.Session) {
	s.mu.Lock()
	s.sess, s.load = sess, nil
	s.mu.Unlock()
}

// Defer has load read the snapshot the first time it is needed (the
// package doc). A loader not run yet is replaced.
func (s *sessionSnap) Defer(load func() *session.Session) {
	s.mu.Lock()
	s.sess, s.load = nil, load
	s.mu.Unlock()
}

// Load runs the deferred loader now, if one is left.
func (s *sessionSnap) Load() {
	s.mu.Lock()
	s.loaded()
	s.mu.Unlock()
}

// loaded runs the deferred loader, if any; the caller holds s.mu.
func (s *sessionSnap) loaded() {
	if s.load != nil {
		f := s.load
		s.load = nil
		s.sess = f()
	}
}

// Change replaces the snapshot by a deep copy changed by f (a new one
// for agent id, created now, when there is none), without writing it.
func (s *sessionSnap) Change(id string, now func() time.Time, f func(*session.Session)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.change(id, now, f)
}

func (s *sessionSnap) change(id string, now func() time.Time, f func(*session.Session)) {
	s.loaded()
	var n *session.Session
	if s.sess != nil {
		n = s.sess.Clone() // deep: a writer may be encoding the old one
	} else {
		n = &session.Session{ID: id, CreatedAt: now().UTC()}
	}
	f(n)
	n.UpdatedAt = now().UTC()
	s.sess = n
}

// snapshotWriter writes snapshots behind. Save, Delay and Now are required.
type snapshotWriter struct {
	// Save writes a snapshot (store.Snapshots.Save).
	Save func(*session.Session) error
	// Delay waits before a write (returns at once when the engine stops).
	Delay func()
	// Now stamps the snapshots.
	Now    func() time.Time
	Logger hclog.Logger
	wg     sync.WaitGroup
}

// Update changes agent id's snapshot through f (UpdatedAt is stamped) and
// has it written in the background; after (if not nil) runs after each
// write, on the writer goroutine.
func (w *snapshotWriter) Update(s *sessionSnap, id string, f func(*session.Session), after func()) {
	s.mu.Lock()
	s.change(id, w.Now, f)
	if s.saving {
		s.dirty = true
		s.mu.Unlock()
		return
	}
	s.saving = true
	s.mu.Unlock()
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		for {
			w.Delay()
			// The write below copies the latest state, so the changes made
			// while waiting need no second one.
			s.mu.Lock()
			s.dirty = false
			s.mu.Unlock()
			if err := w.Flush(s); err != nil {
				w.log().Error("saving session.json", "agent", id, "err", err)
			}
			if after != nil {
				after()
			}
			s.mu.Lock()
			if !s.dirty {
				s.saving = false
				s.mu.Unlock()
				return
			}
			s.mu.Unlock()
		}
	}()
}

// Flush writes the latest snapshot now.
func (w *snapshotWriter) Flush(s *sessionSnap) error {
	s.write.Lock()
	defer s.write.Unlock()
	s.mu.Lock()
	s.loaded()
	cp := s.sess.Clone()
	s.mu.Unlock()
	if cp == nil {
		return nil // nothing to write
	}
	return w.Save(cp)
}

// Wait waits for the writers started so far.
func (w *snapshotWriter) Wait() { w.wg.Wait() }

func (w *snapshotWriter) log() hclog.Logger {
	if w.Logger == nil {
		return hclog.NewNullLogger()
	}
	return w.Logger
}
