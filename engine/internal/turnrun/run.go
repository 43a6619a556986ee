package turnrun

import (
	"context"
	"errors"
	"fmt"

	"github.com/warren-dev/warren/engine/internal/domainerr"
	"github.com/warren-dev/warren/engine/internal/subs"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/session"
)

// Run runs one turn of a claimed agent to its end, aftermath included;
// parent is the context every turn stops with.
func (r Runner) Run(parent context.Context, ag Agent, req Request) (res Result) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	// A release between the claim and here found no turn to cancel: Begin
	// sees it, and the turn does not start.
	t, released := ag.Begin(req, cancel)
	res.RunID = t.RunID
	from := req.From
	if from == "" {
		from = schema.StateIdle
	}
	outcome := Failed
	defer func() {
		ag.Ended()
		r.finish(ag, outcome)
	}()

	if released != nil {
		res.Err = domainerr.New(domainerr.Unavailable, "agent %s is no longer run by this daemon: %v", ag.ID(), released)
		outcome = None
		return res
	}
	if err := ag.Provider(t.Provider); err != nil {
		res.Err = err
		outcome = None
		return res
	}
	// The end of an earlier run that could not be logged goes first.
	if err := ag.FlushOwed(); err != nil {
		res.Err = logFailure(fmt.Errorf("agent %s cannot start a turn: %w", ag.ID(), err))
		outcome = None
		return res
	}
	if _, err := subs.AppendWith(ag, ag.Notices(from, schema.StateBusy, subs.Key(t.RunID, t.Turn)), eventlog.Record{Event: schema.TurnStart,
		Data: schema.TurnStartData{RunID: t.RunID, Turn: t.Turn, BootID: r.BootID, Prompt: req.Prompt, Provider: t.Provider,
			Model: t.Model, MessageIDs: nonNil(req.MessageIDs)}}); err != nil {
		res.Err = logFailure(fmt.Errorf("logging turn.start for agent %s: %w", ag.ID(), err))
		outcome = None
		return res
	}
	ag.SaveSession(func(s *session.Session) {
		s.State = session.StateRunning
		s.Provider, s.Model = t.Provider, t.Model
		s.Run = &session.Run{RunID: t.RunID, BootID: r.BootID, StartedAt: r.Now().UTC()}
	})
	ag.Notify()

	var usage provider.Usage
	response, attempts, err := r.attempts(ctx, ag, req, t, &usage)
	outcome = r.end(ctx, ag, t, response, attempts, usage, err, &res)
	return res
}

// end logs how the turn's attempts ended (turn.complete, the wait that
// suspended the run, turn.cancelled or turn.failed), fills in res and
// returns the outcome finish acts on (None when the end could not be
// logged: it is owed).
func (r Runner) end(ctx context.Context, ag Agent, t Turn, response string, attempts int,
	usage provider.Usage, err error, res *Result) (outcome Outcome) {
	runID, turn := t.RunID, t.Turn
	// The notices of busy -> idle go in the end's write.
	idle := func(event string, data any) error {
		_, err := subs.AppendWith(ag, ag.Notices(schema.StateBusy, schema.StateIdle, subs.Key(runID, turn)), eventlog.Record{Event: event, Data: data})
		return err
	}
	switch {
	case err == nil:
		outcome = Complete
		done := schema.TurnCompleteData{RunID: runID, Turn: turn, Response: response}
		if !usage.IsZero() {
			done.Usage = &usage
		}
		if lerr := idle(schema.TurnComplete, done); lerr != nil {
			// Not durable, so not complete: the run ends as failed once the
			// log takes it.
			ag.Owe(runID, schema.TurnFailed, schema.TurnFailedData{RunID: runID, Turn: turn, Attempts: attempts,
				Error: "the turn's result could not be logged: " + lerr.Error()}, lerr)
			res.Err = logFailure(fmt.Errorf("logging turn.complete for agent %s: %w", ag.ID(), lerr))
			return None
		}
		res.Response, res.Status = response, session.StatusIdle
	case errors.Is(err, provider.ErrRunSuspended):
		outcome = Suspended
		res.Status = session.StatusSuspended
		res.Wait, res.Token = ag.Suspended(runID)
	case ctx.Err() != nil || errors.Is(err, context.Canceled):
		outcome = Cancelled
		if lerr := idle(schema.TurnCancelled, schema.TurnCancelledData{RunID: runID, Turn: turn}); lerr != nil {
			r.Log.Error("logging turn.cancelled", "agent", ag.ID(), "err", lerr)
			ag.Owe(runID, schema.TurnCancelled, schema.TurnCancelledData{RunID: runID, Turn: turn}, lerr)
			outcome = None
		}
		res.Status = session.StatusIdle
		res.Err = domainerr.New(domainerr.WrongState, "turn cancelled")
	default:
		outcome = Failed
		failed := schema.TurnFailedData{RunID: runID, Turn: turn, Error: err.Error(), Attempts: attempts}
		if lerr := idle(schema.TurnFailed, failed); lerr != nil {
			r.Log.Error("logging turn.failed", "agent", ag.ID(), "err", lerr)
			ag.Owe(runID, schema.TurnFailed, failed, lerr)
			outcome = None
		}
		res.Status = session.StatusIdle
		res.Err = err
	}
	return outcome
}

// finish is a turn's aftermath: session.json, subscriptions, deferred
// work (spawns, completion), and the next wake.
func (r Runner) finish(ag Agent, outcome Outcome) {
	state := session.StateIdle
	if outcome == Suspended {
		state = session.StateSuspended
	}
	wait := ag.LiveWait()
	if outcome != None {
		ag.SaveSession(func(s *session.Session) {
			s.State = state
			if state == session.StateSuspended && s.Run != nil {
				s.Run.Wait = wait
			} else if state == session.StateIdle {
				s.Run = nil
			}
		})
	}
	deferred, completing := ag.Rest(outcome == Failed)
	// At rest now: the turn's last entries were logged while it was busy.
	ag.Checkpoint()
	if outcome != None {
		ag.Notify() // busy -> to, owed by the end's write (run.waiting's for a wait)
	}
	for _, f := range deferred {
		f()
	}
	defer ag.Changed()
	// Before the change signal: a waiter woken by it sees the aftermath
	// done.
	defer ag.Settled()
	if completing {
		if err := ag.Terminate(); err != nil {
			r.Log.Error("terminating a completed agent", "agent", ag.ID(), "err", err)
		}
		return
	}
	if outcome == Failed {
		ag.NotifyFailure()
	}
	ag.Wake()
}

// logFailure is a failed log write as the caller sees it: a log that
// refuses appends until it heals is domainerr.Unavailable.
func logFailure(err error) error {
	if errors.Is(err, eventlog.ErrPoisoned) {
		return domainerr.New(domainerr.Unavailable, "%w", err)
	}
	return err
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
