// Package owed holds the end of an agent's run that could not be logged.
//
// A log whose write failed (ENOSPC, EROFS, EMFILE, a failed fsync) refuses
// appends until it reopens itself (eventlog: "Faults and healing"). A run
// whose end (turn.complete, turn.failed, turn.cancelled) could not be
// logged then stays open in the log; its end is owed: written as soon as
// the log accepts appends (when it heals, before the agent's next turn, or
// by agent cancel), after which the agent is idle. owedEnd keeps that record
// for one agent and writes it once (engine/degraded.go decides when).
//
// # Locks
//
// An owedEnd has two mutexes. Flush holds the outer one across the write and
// the aftermath it is given (concurrent flushes write the end once, and
// the second returns after the first's aftermath); the inner one is a leaf
// guarding the record, taken briefly by every method and never across a
// call out, so an owedEnd may be read under the caller's locks (the engine
// reads it under an agent's a.mu).
package engine

import (
	"fmt"
	"sync"
)

// owedEnd is the owed run end of one agent. The zero value owes nothing.
type owedEnd struct {
	flush sync.Mutex // serialises Flush
	mu    sync.Mutex // guards e
	e     *owedEntry
}

type owedEntry struct {
	runID, event string
	data         any
	cause        error
}

// Owe records that the end of run runID (event with data) could not be
// logged, because of cause.
func (o *owedEnd) Owe(runID, event string, data any, cause error) {
	o.mu.Lock()
	o.e = &owedEntry{runID: runID, event: event, data: data, cause: cause}
	o.mu.Unlock()
}

// Owed reports whether a run end is owed, and which: its run, event and
// why it could not be logged.
func (o *owedEnd) Owed() (runID, event string, cause error, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.e == nil {
		return "", "", nil, false
	}
	return o.e.runID, o.e.event, o.e.cause, true
}

// Flush writes the owed run end, if any, with write (an append to the
// agent's log); once written nothing is owed and after runs, still under
// Flush's lock (so that a concurrent Flush, which finds nothing owed, does
// not return before the aftermath of the write is done). A failed write
// leaves the end owed; the error says which.
func (o *owedEnd) Flush(write func(event string, data any) error, after func(runID, event string)) error {
	o.flush.Lock()
	defer o.flush.Unlock()
	o.mu.Lock()
	e := o.e
	o.mu.Unlock()
	if e == nil {
		return nil
	}
	if err := write(e.event, e.data); err != nil {
		return fmt.Errorf("the end of run %s (%s) is still not logged: %w", e.runID, e.event, err)
	}
	o.mu.Lock()
	o.e = nil
	o.mu.Unlock()
	after(e.runID, e.event)
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
