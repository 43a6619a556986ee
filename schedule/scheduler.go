package schedule

import (
	"context"
	"sync"
	"time"
)

// Scheduler owns the timers and background work of one component (see the
// package doc). Its zero value is not usable; call New.
type Scheduler struct {
	clock Clock

	mu      sync.Mutex // guards closed, pending, keyed
	closed  bool
	pending map[*entry]struct{}
	keyed   map[key]*entry
	running sync.WaitGroup // callbacks and work in progress
}

type key struct{ owner, name string }

// entry is one armed timer.
type entry struct {
	key   key
	named bool
	timer Timer
	done  bool // fired or cancelled (under Scheduler.mu)
}

// New returns a Scheduler on clock (Real when nil).
func New(clock Clock) *Scheduler {
	if clock == nil {
		clock = Real()
	}
	return &Scheduler{clock: clock, pending: map[*entry]struct{}{}, keyed: map[key]*entry{}}
}

// After arms f to run once d has passed. It reports false (and arms
// nothing) once the Scheduler is stopped.
func (s *Scheduler) After(d time.Duration, f func()) bool {
	return s.arm(key{}, false, d, f)
}

// At arms f to run at t (at once if t has passed). It reports false once
// the Scheduler is stopped.
func (s *Scheduler) At(t time.Time, f func()) bool {
	return s.arm(key{}, false, t.Sub(s.clock.Now()), f)
}

// Arm arms f to run at t under the key (owner, name), cancelling the
// timer armed under that key before, if it has not started. It reports
// false once the Scheduler is stopped.
func (s *Scheduler) Arm(owner, name string, t time.Time, f func()) bool {
	return s.arm(key{owner, name}, true, t.Sub(s.clock.Now()), f)
}

func (s *Scheduler) arm(k key, named bool, d time.Duration, f func()) bool {
	e := &entry{key: k, named: named}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if named {
		if old := s.keyed[k]; old != nil {
			s.cancelLocked(old)
		}
		s.keyed[k] = e
	}
	s.pending[e] = struct{}{}
	// The clock never runs f inside AfterFunc (Real runs it on another
	// goroutine, Fake on the next Advance), so holding s.mu here is safe;
	// e.timer is set before fire can look at it.
	e.timer = s.clock.AfterFunc(d, func() { s.fire(e, f) })
	return true
}

// fire runs an armed entry's callback unless it was cancelled or the
// Scheduler stopped.
func (s *Scheduler) fire(e *entry, f func()) {
	s.mu.Lock()
	if e.done {
		s.mu.Unlock()
		return
	}
	s.forgetLocked(e)
	s.running.Add(1)
	s.mu.Unlock()
	defer s.running.Done()
	f()
}

// Cancel stops the timer armed under (owner, name). It reports whether
// there was one that had not started; if so its callback never runs.
func (s *Scheduler) Cancel(owner, name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.keyed[key{owner, name}]
	if e == nil {
		return false
	}
	s.cancelLocked(e)
	return true
}

// CancelOwner stops every timer armed under owner (with Arm) that has not
// started, and returns how many it stopped.
func (s *Scheduler) CancelOwner(owner string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, e := range s.keyed {
		if k.owner == owner {
			s.cancelLocked(e)
			n++
		}
	}
	return n
}

// Pending is the number of armed timers that have neither started nor been
// cancelled.
func (s *Scheduler) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}

func (s *Scheduler) cancelLocked(e *entry) {
	e.timer.Stop()
	s.forgetLocked(e)
}

func (s *Scheduler) forgetLocked(e *entry) {
	e.done = true
	delete(s.pending, e)
	if e.named && s.keyed[e.key] == e {
		delete(s.keyed, e.key)
	}
}

// Go runs f on a new goroutine as tracked work: Wait waits for it. It
// reports false (and runs nothing) once the Scheduler is stopped.
func (s *Scheduler) Go(f func()) bool {
	if !s.begin() {
		return false
	}
	go func() {
		defer s.running.Done()
		f()
	}()
	return true
}

// Run runs f on the caller's goroutine as tracked work: Wait waits for it.
// It reports false (and runs nothing) once the Scheduler is stopped.
func (s *Scheduler) Run(f func()) bool {
	if !s.begin() {
		return false
	}
	defer s.running.Done()
	f()
	return true
}

func (s *Scheduler) begin() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.running.Add(1)
	return true
}

// Stop refuses new timers and work from now on and cancels every pending
// timer. It reports whether this call stopped the Scheduler (false: it was
// stopped already). Work and callbacks already running go on; Wait waits
// for them.
func (s *Scheduler) Stop() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.closed = true
	for e := range s.pending {
		s.cancelLocked(e)
	}
	return true
}

// Stopped reports whether Stop has been called.
func (s *Scheduler) Stopped() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Wait waits until every callback and work item started before Stop has
// returned, or until ctx ends (then it returns ctx.Err() and the work goes
// on). Call it after Stop; before, new work may keep it waiting.
func (s *Scheduler) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		s.running.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// WaitAll waits, without a bound, until every callback and work item
// started before Stop has returned (a simulated crash's drain). Call it
// after Stop.
func (s *Scheduler) WaitAll() { s.running.Wait() }

// Close stops the Scheduler and waits for its running callbacks and work
// (Stop, then Wait).
func (s *Scheduler) Close(ctx context.Context) error {
	s.Stop()
	return s.Wait(ctx)
}
