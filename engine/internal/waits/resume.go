package waits

import (
	"context"
	"errors"
	"fmt"

	"github.com/warren-dev/warren/engine/internal/domainerr"
	"github.com/warren-dev/warren/eventlog"
	fold "github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/session"
	"github.com/warren-dev/warren/token"
)

// Request is a resume as asked: with Presented (the client string holding
// the secret) or TokenID (the wait's public id, as the operator may), and
// the Response; with neither it re-runs an interrupted run.
type Request struct {
	Presented, TokenID, Response string
}

// Resume answers the agent's wait, or re-runs its interrupted run, and
// returns when the resumed turn ends (see the package doc).
func (w Waits[R]) Resume(ctx context.Context, ag Agent[R], req Request) (R, error) {
	var zero R
	run := ag.State().Run
	if req.Presented == "" && req.TokenID == "" {
		return w.rerun(ctx, ag, run)
	}
	runID := run.RunID
	if run.Wait == nil || run.Ended {
		// No wait now: only a repeat of a resume that consumed the token
		// can succeed; the token service decides.
		tokID := req.TokenID
		if req.Presented != "" {
			var err error
			if tokID, _, err = token.Parse(req.Presented); err != nil {
				return zero, refuse(domainerr.TokenRejected, "%w", err)
			}
		}
		t, known := w.Tokens.Get(tokID)
		if !known {
			return zero, refuse(domainerr.TokenRejected, "token rejected: agent %s has no wait to resume", ag.Name())
		}
		runID = t.RunID
	}
	settle(ctx, ag, runID)
	tok, repeat, err := w.consume(ag, req, runID)
	if err != nil {
		return zero, err
	}
	if repeat {
		return w.repeat(ctx, ag, tok.ID, runID, run)
	}
	res := <-ag.Start(run, schema.StateWaiting)
	ag.Resumes().Finish(tok.ID, res)
	return res, nil
}

// settle waits, bounded by ctx, while the turn that logged the wait of
// run runID is still unwinding: run.waiting is logged (and shown: the
// run.waiting event, the USER notice, waits.list, agent attach) before the
// turn has stopped its provider and released the agent. An answer sent
// the moment the wait is shown then lands on the wait instead of finding
// the agent mid-turn.
func settle[R any](ctx context.Context, ag Agent[R], runID string) {
	for {
		changed := ag.Changed()
		if !unwinding(ag.State(), runID) {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// unwinding: the agent's turn of run runID still runs, and the run waits.
func unwinding(s State, runID string) bool {
	return s.Busy && s.Turn != nil && s.Turn.RunID == runID &&
		s.Run.RunID == runID && s.Run.Wait != nil && !s.Run.Ended
}

// consume has the token service check the token and consume it for run
// runID: under the token's lock the agent is claimed and the resume
// logged. A rejection by the token service (token.ErrRejected) is a
// refusal (domainerr.TokenRejected); an error of the agent's steps is returned as the service
// wrapped it.
func (w Waits[R]) consume(ag Agent[R], req Request, runID string) (token.Token, bool, error) {
	commit := func(t token.Token) error { return commitResume(ag, t, req.Response) }
	var (
		tok    token.Token
		repeat bool
		err    error
	)
	if req.TokenID != "" {
		tok, err = w.Tokens.ConsumeByID(ag.ID(), runID, req.TokenID, req.Response, w.Now(), commit)
	} else {
		tok, repeat, err = w.Tokens.Consume(ag.ID(), runID, req.Presented, req.Response, w.Now(), commit)
	}
	if err != nil && errors.Is(err, token.ErrRejected) {
		err = refuse(domainerr.TokenRejected, "%w", err)
	}
	return tok, repeat, err
}

// commitResume claims the agent and logs token.consumed and run.resumed
// in one write; the resume's result is then shared with its repeats.
func commitResume[R any](ag Agent[R], t token.Token, response string) error {
	if err := ag.Claim(); err != nil {
		return err
	}
	_, err := ag.AppendBatch([]eventlog.Record{
		{Event: schema.TokenConsumed, Data: schema.TokenData{TokenID: t.ID, RunID: t.RunID}},
		{Event: schema.RunResumed, Data: schema.RunResumedData{RunID: t.RunID, TokenID: t.ID, Response: response}},
	})
	if err != nil {
		ag.Unclaim()
		return fmt.Errorf("logging the resume: %w", err)
	}
	ag.Resumes().Open(t.ID)
	return nil
}

// repeat answers a repeat of a successful resume (same token, same
// response) without starting anything new: with the first resume's result
// (waiting for it if its turn still runs, or from the log after a
// restart); by finishing the run if a restart cut the first resume's turn
// off; and refused (domainerr.TokenRejected) if that run ended without a result.
func (w Waits[R]) repeat(ctx context.Context, ag Agent[R], tokenID, runID string, run fold.Run) (R, error) {
	if res, live, err := ag.Resumes().Shared(ctx, tokenID); live {
		return res, err
	}
	if lr, ok := ag.LastResume(); ok && lr.TokenID == tokenID && lr.Completed {
		return w.Result(runID, session.StatusIdle, lr.Result), nil
	}
	if run.RunID == runID && interruptedByRestart(run) {
		return w.rerun(ctx, ag, run)
	}
	var zero R
	return zero, refuse(domainerr.TokenRejected, "token rejected: %s was consumed, and its run ended without a result", tokenID)
}

// interruptedByRestart: run is open and a restart interrupted it.
func interruptedByRestart(run fold.Run) bool {
	return !run.Ended && run.Interrupted && run.Reason == schema.ReasonProcessRestart
}

// Rerunnable reports whether run is one Resume without a token re-runs:
// open, and interrupted by a restart.
func Rerunnable(run fold.Run) bool {
	return run.RunID != "" && interruptedByRestart(run)
}

// rerun re-runs a run interrupted by a restart (the turn answers the tool
// calls its log records from the record). If ctx ends first, the run goes
// on and the result says it is running.
func (w Waits[R]) rerun(ctx context.Context, ag Agent[R], run fold.Run) (R, error) {
	var zero R
	if !Rerunnable(run) {
		return zero, refuse(domainerr.WrongState,
			"agent %s has no interrupted run to resume; to answer a wait pass --token and a response", ag.Name())
	}
	if err := ag.Claim(); err != nil {
		return zero, err
	}
	if _, err := ag.Append(schema.RunResumed, schema.RunResumedData{RunID: run.RunID}); err != nil {
		ag.Release()
		return zero, fmt.Errorf("logging run.resumed: %w", err)
	}
	select {
	case res := <-ag.Start(run, ""):
		return res, nil
	case <-ctx.Done():
		return w.Result(run.RunID, "running", ""), nil
	}
}
