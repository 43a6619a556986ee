// Package snapsave keeps each agent's session.json snapshot in memory and
// writes it behind the log (docs/DECISIONS.md). The log is the authority,
// so the snapshot is written off the acknowledgement path: a per-agent
// writer waits a delay after a change (the Writer's Delay, cut short when
// the engine stops), then writes the latest state, and repeats while
// changes came during the wait or the write. A busy agent's snapshot is
// written about once per delay rather than twice per turn. A failed save
// is logged: the log can rebuild session.json.
//
// # Goroutines and locks
//
// Update starts, at most once at a time per agent, a writer goroutine of
// the Writer's own; Wait waits for them all (the engine's Close, after it
// has cut their delay short). A Snapshot has two mutexes: a leaf guarding
// the snapshot and the writer's flags, taken briefly and never across a
// call out, so a Snapshot may be read under the caller's locks (the engine
// reads it under an agent's a.mu); and the write lock, held across one
// write so that writes of one agent are serialised and an older snapshot
// never lands after a newer one.
package snapsave

import (
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/session"
)

// Snapshot is one agent's latest session.json, in memory. The zero value
// holds none.
type Snapshot struct {
	mu     sync.Mutex
	sess   *session.Session
	saving bool // a writer runs
	dirty  bool // the snapshot changed while it waited or wrote
	write  sync.Mutex
}

// Get returns the latest snapshot (nil: none yet). The caller must not
// change it: every change makes a new one.
func (s *Snapshot) Get() *session.Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sess
}

// Set replaces the snapshot without writing it (it is on disk already, or
// is written by the next flush).
func (s *Snapshot) Set(sess *session.Session) {
	s.mu.Lock()
	s.sess = sess
	s.mu.Unlock()
}

// Change replaces the snapshot by a deep copy changed by f (a new one
// for agent id, created now, when there is none), without writing it.
func (s *Snapshot) Change(id string, now func() time.Time, f func(*session.Session)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.change(id, now, f)
}

func (s *Snapshot) change(id string, now func() time.Time, f func(*session.Session)) {
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

// Writer writes snapshots behind. Save, Delay and Now are required.
type Writer struct {
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
func (w *Writer) Update(s *Snapshot, id string, f func(*session.Session), after func()) {
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
func (w *Writer) Flush(s *Snapshot) error {
	s.write.Lock()
	defer s.write.Unlock()
	s.mu.Lock()
	cp := s.sess.Clone()
	s.mu.Unlock()
	return w.Save(cp)
}

// Wait waits for the writers started so far.
func (w *Writer) Wait() { w.wg.Wait() }

func (w *Writer) log() hclog.Logger {
	if w.Logger == nil {
		return hclog.NewNullLogger()
	}
	return w.Logger
}
