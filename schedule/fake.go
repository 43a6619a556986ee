package schedule

import (
	"container/heap"
	"sync"
	"time"
)

// Fake is a Clock whose time moves only when told to. Timers fire during
// Advance and Set, in order of due time (ties in the order they were
// armed), on the goroutine that moves the clock. A callback must not move
// the clock itself (Advance and Set are serialised). Kept for tests: the
// daemon runs on the real clock; its timer tests run on a Fake.
type Fake struct {
	advance sync.Mutex // serialises Advance and Set, so firings stay in order

	mu     sync.Mutex
	cond   *sync.Cond // signalled when timers are armed (BlockUntil)
	now    time.Time
	seq    uint64
	timers fakeHeap
}

// NewFake returns a Fake clock reading start.
func NewFake(start time.Time) *Fake {
	f := &Fake{now: start}
	f.cond = sync.NewCond(&f.mu)
	return f
}

// Now is the fake time: where the last Advance or Set left it, or, while
// a callback fired by them runs, that callback's due time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// AfterFunc arms f to fire once the clock reaches Now()+d. A timer due
// already (d <= 0) fires at the next Advance or Set, never inside
// AfterFunc (whose caller may hold locks the callback takes).
func (f *Fake) AfterFunc(d time.Duration, fn func()) Timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	t := &fakeTimer{clock: f, when: f.now.Add(max(d, 0)), seq: f.seq, fn: fn, index: -1}
	heap.Push(&f.timers, t)
	f.cond.Broadcast()
	return t
}

// Advance moves the clock forward by d, firing every timer due by then,
// including timers armed by the callbacks it fires. It returns when the
// last of them has returned. Advance(0) fires the timers due now.
func (f *Fake) Advance(d time.Duration) {
	f.advance.Lock()
	defer f.advance.Unlock()
	f.mu.Lock()
	to := f.now.Add(max(d, 0))
	f.mu.Unlock()
	f.fireUntil(to)
}

// Set moves the clock to t (never backwards: an earlier t fires what is due
// now and leaves the time as it is), firing every timer due by then as
// Advance does.
func (f *Fake) Set(t time.Time) {
	f.advance.Lock()
	defer f.advance.Unlock()
	f.fireUntil(t)
}

// fireUntil fires the timers due by t in order and moves the clock to t.
// The caller holds f.advance.
func (f *Fake) fireUntil(t time.Time) {
	for {
		f.mu.Lock()
		if len(f.timers) == 0 || f.timers[0].when.After(t) {
			if t.After(f.now) {
				f.now = t
			}
			f.mu.Unlock()
			return
		}
		next := heap.Pop(&f.timers).(*fakeTimer)
		if next.when.After(f.now) {
			f.now = next.when
		}
		f.mu.Unlock()
		next.fn()
	}
}

// Pending is the number of armed timers that have not fired or been
// stopped.
func (f *Fake) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// Next is the due time of the earliest pending timer.
func (f *Fake) Next() (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.timers) == 0 {
		return time.Time{}, false
	}
	return f.timers[0].when, true
}

// BlockUntil waits until at least n timers are pending: a test calls it
// before Advance when another goroutine is about to arm the timer it means
// to fire (a retry's backoff, a wait's deadline).
func (f *Fake) BlockUntil(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(f.timers) < n {
		f.cond.Wait()
	}
}

type fakeTimer struct {
	clock *Fake
	when  time.Time
	seq   uint64
	fn    func()
	index int // in clock.timers; -1 once fired or stopped
}

func (t *fakeTimer) Stop() bool {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	if t.index < 0 {
		return false
	}
	heap.Remove(&t.clock.timers, t.index)
	return true
}

// fakeHeap orders timers by due time, then by the order they were armed.
type fakeHeap []*fakeTimer

func (h fakeHeap) Len() int { return len(h) }
func (h fakeHeap) Less(i, j int) bool {
	if !h[i].when.Equal(h[j].when) {
		return h[i].when.Before(h[j].when)
	}
	return h[i].seq < h[j].seq
}
func (h fakeHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *fakeHeap) Push(x any) {
	t := x.(*fakeTimer)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *fakeHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	t.index = -1
	*h = old[:len(old)-1]
	return t
}
