package engine

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// The end of an agent's run that could not be logged.
//
// A log whose write failed (ENOSPC, EROFS, EMFILE, a failed fsync) refuses
// appends until it reopens itself (eventlog: "Faults and healing"). A run
// whose end (turn.complete, turn.failed, turn.cancelled) could not be
// logged then stays open in the log; its end is owed: written as soon as
// the log accepts appends (when it heals, before the agent's next turn, or
// by agent cancel), after which the agent is idle. owedEnd keeps that record
// for one agent and writes it once (engine/degraded.go decides when).
//
// Flush holds the owedEnd's mutex across the write and the aftermath it is
// given (concurrent flushes write the end once, and the second returns
// after the first's aftermath); the record itself is an atomic pointer, so
// an owedEnd may be read under any lock (the record reads it under its
// own).

// owedEnd is the owed run end of one agent. The zero value owes nothing.
type owedEnd struct {
	flush sync.Mutex // serialises Flush
	e     atomic.Pointer[owedEntry]
}

type owedEntry struct {
	runID, event string
	data         any
	cause        error
	// unconfirmed: the run's turn.start failed too; the end is owed only
	// if the log turns out to hold the start (a cluster's log can store
	// an append whose answer was lost, and hands it over when it heals).
	unconfirmed bool
}

// Owe records that the end of run runID (event with data) could not be
// logged, because of cause.
func (o *owedEnd) Owe(runID, event string, data any, cause error) {
	o.e.Store(&owedEntry{runID: runID, event: event, data: data, cause: cause})
}

// OweUnconfirmed records the end of run runID whose turn.start could not
// be logged: written only if the log, once it takes appends again, holds
// the run open.
func (o *owedEnd) OweUnconfirmed(runID, event string, data any, cause error) {
	o.e.Store(&owedEntry{runID: runID, event: event, data: data, cause: cause, unconfirmed: true})
}

// Owed reports whether a run end is owed, and which: its run, event and
// why it could not be logged.
func (o *owedEnd) Owed() (runID, event string, cause error, ok bool) {
	e := o.e.Load()
	if e == nil {
		return "", "", nil, false
	}
	return e.runID, e.event, e.cause, true
}

// Flush writes the owed run end, if any, with write (an append to the
// agent's log); once written nothing is owed and after runs, still under
// Flush's lock (so that a concurrent Flush, which finds nothing owed, does
// not return before the aftermath of the write is done). A failed write
// leaves the end owed; the error says which.
//
// A run that open reports ended (or never started) gets nothing written:
// a cluster's log can store an append whose answer was lost (the very end
// that is owed), and hands it over when it heals, before OnHeal flushes;
// the end is then already in the log, and after runs (logged false). An
// unconfirmed end (its turn.start failed) waits while the log is degraded
// (the fold cannot say yet whether the start was stored), and is dropped
// without aftermath when the healed log does not hold the run.
func (o *owedEnd) Flush(open func(runID string) bool, degraded func() bool, write func(event string, data any) error, after func(runID, event string, written bool)) error {
	o.flush.Lock()
	defer o.flush.Unlock()
	e := o.e.Load()
	if e == nil {
		return nil
	}
	if e.unconfirmed && degraded() {
		return fmt.Errorf("the start of run %s is not known to be logged (%v): the log takes appends again first", e.runID, e.cause)
	}
	if !open(e.runID) {
		o.e.CompareAndSwap(e, nil)
		if !e.unconfirmed {
			after(e.runID, e.event, false)
		}
		return nil
	}
	if err := write(e.event, e.data); err != nil {
		return fmt.Errorf("the end of run %s (%s) is still not logged: %w", e.runID, e.event, err)
	}
	o.e.CompareAndSwap(e, nil) // an end owed meanwhile stays owed
	after(e.runID, e.event, true)
	return nil
}

// Describe says which run end is owed, for agent.list and agent.inspect
// ("" when none).
func (o *owedEnd) Describe() string {
	runID, event, cause, ok := o.Owed()
	if !ok {
		return ""
	}
	return fmt.Sprintf("run %s ended but its %s is not logged yet (%v): the log still shows the run open; it is written as soon as the log accepts appends, or retry `warren agent cancel`",
		runID, event, cause)
}
