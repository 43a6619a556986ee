// Package schedule runs timed work on an injected clock and tracks it, so
// that its owner can stop it all and wait for it at shutdown.
//
// A Clock tells the time and runs a func once a duration has passed on it.
// Real is the system clock (time.Now, time.AfterFunc). Fake is a clock for
// tests: its time moves only when the test calls Advance or Set, which fire
// the timers that came due, in order of due time (ties in the order they
// were armed), on the caller's goroutine, each seeing Now equal to its due
// time; Advance returns once every fired callback has returned.
//
// A Scheduler owns the timers and the background work of one component:
//
//   - At / After arm an anonymous timer; Arm arms a timer under a key
//     (owner, name), replacing the timer armed under the same key, so that
//     Cancel(owner, name) and CancelOwner(owner) can stop it later.
//   - Go runs a func on a new goroutine, Run on the caller's, as tracked
//     work.
//   - Stop refuses new timers and work and cancels every pending timer;
//     Wait waits until the callbacks and the work that started before Stop
//     have returned; Close is Stop then Wait.
//
// A timer callback runs on the goroutine its clock fires it on (for Real,
// one the runtime starts; for Fake, the goroutine that advances the clock).
// The Scheduler holds its mutex only for its bookkeeping (arming or
// stopping a timer on the clock included: a Clock never runs a callback
// inside AfterFunc or Stop), never while a callback or work item runs. So a
// callback may arm, cancel and start work freely, and callers may hold
// their own locks while they call the Scheduler: theirs come before its in
// any lock order.
//
// Guarantees: a timer whose Cancel (or CancelOwner, Stop) returned before it
// fired never runs its callback; a callback or work item that the Scheduler
// started is waited for by Wait; nothing the Scheduler owns starts after
// Stop.
package schedule
