package waits

import (
	"context"
	"errors"
	"fmt"

	"github.com/warren-dev/warren/engine/internal/domainerr"
	"github.com/warren-dev/warren/engine/internal/subs"
	"github.com/warren-dev/warren/eventlog"

	"github.com/warren-dev/warren/schema"
)

// Cancel cancels the agent's running turn (and returns once it ended), or
// its wait, or closes its interrupted run; the agent becomes idle.
func (w Waits[R]) Cancel(ctx context.Context, ag Agent[R]) error {
	s := ag.State()
	if s.Turn != nil {
		s.Turn.Cancel()
		select {
		case <-s.Turn.Done:
			return ag.OwedErr()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	run := s.Run
	if run.RunID == "" || run.Ended {
		return refuse(domainerr.WrongState, "agent %s has no running turn or wait to cancel", ag.Name())
	}
	if err := ag.Claim(); err != nil {
		return err
	}
	defer ag.Release()
	if ag.Owed() {
		// The run ended already; only its end is not logged yet.
		if err := ag.FlushOwed(); err != nil {
			return ag.OwedErr()
		}
		return nil
	}
	if s.LiveWait {
		if err := w.Revoke(ag, run.Wait.TokenID, run.RunID, schema.RevokeCancelled); err != nil {
			return err
		}
	}
	var owed []eventlog.Record
	if s.LiveWait {
		owed = ag.Notices(schema.StateWaiting, schema.StateIdle, subs.Key(run.RunID, run.Turn))
	}
	if _, err := subs.AppendWith(ag, owed, eventlog.Record{Event: schema.TurnCancelled,
		Data: schema.TurnCancelledData{RunID: run.RunID, Turn: run.Turn}}); err != nil {
		return logFailure(fmt.Errorf("logging turn.cancelled for agent %s: %w; the run is still open in the log and nothing else changed; retry agent cancel once the log accepts appends", ag.Name(), err))
	}
	ag.Cancelled(s.LiveWait)
	return nil
}

// logFailure is err, a failed write to the agent's log; a log that
// refuses appends until it heals makes it a refusal (domainerr.Unavailable).
func logFailure(err error) error {
	if errors.Is(err, eventlog.ErrPoisoned) {
		return refuse(domainerr.Unavailable, "%w", err)
	}
	return err
}
