package engine

import (
	"github.com/warren-dev/warren/eventlog"
)

// The end of the agent's open run that could not be logged (owed.go,
// with its own locks): recorded by the turn's end, written when the log
// accepts appends again.

// Owe records that the end of run runID could not be logged.
func (a *agent) Owe(runID, event string, data any, cause error) {
	a.owed.Owe(runID, event, data, cause)
}

// OweUnconfirmed records the end of run runID whose turn.start failed:
// owed only if the log turns out to hold the start (owed.go).
func (a *agent) OweUnconfirmed(runID, event string, data any, cause error) {
	a.owed.OweUnconfirmed(runID, event, data, cause)
}

// logDegraded reports whether the agent's log refuses appends.
func (a *agent) logDegraded() bool { return a.Log != nil && a.Log.Degraded() != nil }

// Owed reports whether the end of the agent's run is owed.
func (a *agent) Owed() bool {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	_, _, _, owed := a.owed.Owed()
	return owed
}

// OwedEnd is the owed run end: its run, its event and why it could not be
// logged (ok false when none is owed).
func (a *agent) OwedEnd() (runID, event string, cause error, ok bool) { return a.owed.Owed() }

// OwedErr is the error of a cancel whose turn stopped but whose end could
// not be logged (ErrUnavailable, saying when it is written); nil
// when no end is owed.
func (a *agent) OwedErr() error {
	runID, event, cause, ok := a.OwedEnd()
	if !ok {
		return nil
	}
	return failf(ErrUnavailable,
		"agent %s: the run %s is stopped, but its %s could not be logged (%v); the log still shows it open; it is written as soon as the log accepts appends (retry agent cancel to try now)",
		a.Name(), runID, event, cause)
}

// WriteOwed writes the owed run end to the agent's log, if any, with the
// records with gives (the notices its busy -> idle owes: noticesFor) in the
// same write, then calls written; concurrent callers write it once
// (owed.End.Flush).
func (a *agent) WriteOwed(with func() []eventlog.Record, written func(runID, event string, logged bool)) error {
	return a.owed.Flush(a.RunOpen, a.logDegraded, func(event string, data any) error {
		_, err := appendOwed(a.Log, with(), eventlog.Record{Event: event, Data: data})
		return err
	}, written)
}

// RunOpen reports whether the agent's fold holds run runID open
// (started, not ended).
func (a *agent) RunOpen(runID string) bool {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	r := a.p.OpenRun()
	return r != nil && r.RunID == runID
}
