package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/warren-dev/warren/eventlog"
	fold "github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/session"
	"github.com/warren-dev/warren/token"
)

// Resuming and ending a run (SPEC 4):
//
//   - Resume answers a wait with the token's secret or, for the operator,
//     its public id: the token service checks it and, under the token's
//     lock, the agent is claimed and token.consumed with run.resumed
//     logged in one write, then the run's turn starts again. A repeat of a
//     resume that succeeded (same token, same response) starts nothing: it
//     shares the first one's result, waiting for it if the turn still
//     runs, or reads it from the log after a restart, or finishes the run
//     if a restart cut the first one's turn off. Without a token, Resume
//     re-runs a run a restart interrupted.
//   - Cancel stops the running turn, or ends the run: the owed end is
//     written if the turn's end could not be logged, otherwise a live
//     wait's token is revoked and turn.cancelled logged.
//
// Refusals (a token that is not good for the resume, nothing to cancel
// or re-run, a log that refuses appends for now) are ErrTokenRejected,
// ErrWrongState and ErrUnavailable with the user's text. Errors of the
// agent's own steps (its claim, its log) are returned as they are.

// Resume answers an agent's wait with a resume token (the client string
// holding the secret) and a response, or, with neither, re-runs its
// interrupted run; it returns when the resumed turn ends.
func (c *Core) Resume(ctx context.Context, agentID, presented, response string) (TurnResult, error) {
	return c.resume(ctx, agentID, resumeRequest{Presented: presented, Response: response})
}

// ResumeOptions is a resume as agent.resume asks it: a token (the client
// string with the secret) or a token id with the response, or neither (a
// re-run); KeepWorkspace skips restoring the run's workspace before it is
// re-run, and the re-run's prompt says its files may have changed.
type ResumeOptions struct {
	Token, TokenID, Response string
	KeepWorkspace            bool
}

// ResumeWith is Resume (or ResumeByID, with TokenID) with options.
func (c *Core) ResumeWith(ctx context.Context, agentID string, o ResumeOptions) (TurnResult, error) {
	if o.TokenID != "" {
		return c.resume(ctx, agentID, resumeRequest{TokenID: o.TokenID, Response: o.Response, KeepWorkspace: o.KeepWorkspace})
	}
	return c.resume(ctx, agentID, resumeRequest{Presented: o.Token, Response: o.Response, KeepWorkspace: o.KeepWorkspace})
}

// ResumeByID answers an agent's wait by its public token id, as the
// operator may (SPEC 4): the socket's owner check is the authority.
func (c *Core) ResumeByID(ctx context.Context, agentID, tokenID, response string) (TurnResult, error) {
	if tokenID == "" {
		return TurnResult{}, failf(ErrInvalid, "an empty token_id names no wait; list the pending waits with warren waits")
	}
	return c.resume(ctx, agentID, resumeRequest{TokenID: tokenID, Response: response})
}

// resumeRequest is a resume as asked: with Presented (the client string
// holding the secret) or TokenID (the wait's public id, as the operator
// may), and the Response; with neither it re-runs an interrupted run.
type resumeRequest struct {
	Presented, TokenID, Response string
	KeepWorkspace                bool
}

func (c *Core) resume(ctx context.Context, agentID string, req resumeRequest) (TurnResult, error) {
	a, ok := c.agent(agentID)
	if !ok {
		return TurnResult{}, notFound(agentID)
	}
	run := a.WaitState().Run
	if req.Presented == "" && req.TokenID == "" {
		return c.rerun(ctx, a, run, schema.ByOperator, req.KeepWorkspace)
	}
	runID := run.RunID
	if run.Wait == nil || run.Ended {
		// No wait now: only a repeat of a resume that consumed the token
		// can succeed; the token service decides.
		tokID := req.TokenID
		if req.Presented != "" {
			var err error
			if tokID, _, err = token.Parse(req.Presented); err != nil {
				return TurnResult{}, failf(ErrTokenRejected, "%w", err)
			}
		}
		t, known := c.tokens.Get(tokID)
		if !known {
			return TurnResult{}, failf(ErrTokenRejected, "token rejected: agent %s has no wait to resume", a.Name())
		}
		runID = t.RunID
	}
	c.settle(ctx, a, runID)
	tok, repeat, err := c.consume(a, req, runID)
	if err != nil {
		return TurnResult{}, err
	}
	if repeat {
		return c.repeatResume(ctx, a, tok.ID, runID, run)
	}
	res := <-c.startRun(a, run, schema.StateWaiting, req.KeepWorkspace)
	a.Resumes().Finish(tok.ID, res)
	return res, nil
}

// keptFilesNote ends the prompt of a re-run whose workspace was not
// restored (keep_workspace).
const keptFilesNote = "\n\n(This turn is re-run on the files of your workspace as the interrupted attempt left them: some may already have been changed.)"

// startRun runs the claimed agent's turn of run again; from is the status
// it leaves ("waiting", or "" for an interrupted run); kept says its
// workspace was not restored first.
func (c *Core) startRun(a *agent, run fold.Run, from string, kept bool) <-chan TurnResult {
	prompt := run.Prompt
	if _, ok := a.OpenWorkspace(); ok && kept {
		prompt += keptFilesNote
	}
	return c.startTurn(a, TurnRequest{Prompt: prompt, MessageIDs: run.MessageIDs, Provider: run.Provider,
		Model: run.Model, RunID: run.RunID, Turn: run.Turn, From: from})
}

// settle waits, bounded by ctx, while the turn that logged the wait of
// run runID is still unwinding: run.waiting is logged (and shown: the
// run.waiting event, the USER notice, waits.list, agent attach) before the
// turn has stopped its provider and released the agent. An answer sent
// the moment the wait is shown then lands on the wait instead of finding
// the agent mid-turn.
func (c *Core) settle(ctx context.Context, a *agent, runID string) {
	_, _ = c.waitAgent(ctx, a, func(s waitState) bool { return !unwinding(s, runID) })
}

// waitAgent waits, bounded by ctx, until done holds for a's wait state,
// read again at each change signal, and returns that state.
func (c *Core) waitAgent(ctx context.Context, a *agent, done func(waitState) bool) (waitState, error) {
	for {
		changed := c.changed.Wait()
		if s := a.WaitState(); done(s) {
			return s, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return waitState{}, ctx.Err()
		}
	}
}

// unwinding: the agent's turn of run runID still runs, and the run waits.
func unwinding(s waitState, runID string) bool {
	return s.Busy && s.Turn != nil && s.Turn.RunID == runID &&
		s.Run.RunID == runID && s.Run.Wait != nil && !s.Run.Ended
}

// consume has the token service check the token and consume it for run
// runID: under the token's lock the agent is claimed and the resume
// logged. A rejection by the token service (token.ErrRejected) is
// ErrTokenRejected; an error of the agent's steps is returned as the
// service wrapped it.
func (c *Core) consume(a *agent, req resumeRequest, runID string) (token.Token, bool, error) {
	commit := func(t token.Token) error { return c.commitResume(a, t, req.Response, req.KeepWorkspace) }
	var (
		tok    token.Token
		repeat bool
		err    error
	)
	if req.TokenID != "" {
		tok, err = c.tokens.ConsumeByID(a.ID(), runID, req.TokenID, req.Response, c.now(), commit)
	} else {
		tok, repeat, err = c.tokens.Consume(a.ID(), runID, req.Presented, req.Response, c.now(), commit)
	}
	if err != nil && errors.Is(err, token.ErrRejected) {
		err = failf(ErrTokenRejected, "%w", err)
	}
	return tok, repeat, err
}

// commitResume claims the agent, puts its workspace back to the run's
// start (unless keep) and logs token.consumed and run.resumed in one
// write; the resume's result is then shared with its repeats.
func (c *Core) commitResume(a *agent, t token.Token, response string, keep bool) error {
	if err := a.Claim(); err != nil {
		return err
	}
	if !keep {
		if err := c.restoreRun(c.ctx, a, t.RunID); err != nil {
			a.Unclaim()
			return err
		}
	}
	_, err := a.AppendBatch([]eventlog.Record{
		{Event: schema.TokenConsumed, Data: schema.TokenData{TokenID: t.ID, RunID: t.RunID}},
		{Event: schema.RunResumed, Data: schema.RunResumedData{RunID: t.RunID, TokenID: t.ID, Response: response, By: schema.ByOperator}},
	})
	if err != nil {
		a.Unclaim()
		return fmt.Errorf("logging the resume: %w", err)
	}
	a.Resumes().Open(t.ID)
	return nil
}

// repeatResume answers a repeat of a successful resume (same token, same
// response) without starting anything new: with the first resume's result
// (waiting for it if its turn still runs, or from the log after a
// restart); by finishing the run if a restart cut the first resume's turn
// off; and refused (ErrTokenRejected) if that run ended without a result.
func (c *Core) repeatResume(ctx context.Context, a *agent, tokenID, runID string, run fold.Run) (TurnResult, error) {
	if res, live, err := a.Resumes().Shared(ctx, tokenID); live {
		return res, err
	}
	if lr, ok := a.LastResume(); ok && lr.TokenID == tokenID && lr.Completed {
		return TurnResult{Response: lr.Result, RunID: runID, Status: session.StatusIdle}, nil
	}
	if run.RunID == runID && interrupted(run) && run.Reason != schema.ReasonWaitTimeout {
		return c.rerun(ctx, a, run, schema.ByOperator, false)
	}
	return TurnResult{}, failf(ErrTokenRejected, "token rejected: %s was consumed, and its run ended without a result", tokenID)
}

// interrupted: run is open and was interrupted: by a restart, a stop or
// a takeover (interrupted_startup), or because its wait timed out
// (interrupted_waiting).
func interrupted(run fold.Run) bool { return run.RunID != "" && !run.Ended && run.Interrupted }

// rerun re-runs an interrupted run (the turn answers the tool calls its
// log records from the record; a run whose wait timed out gets its
// await_input answered with the timeout), logged as by (the operator, or
// the resume policy). If ctx ends first, the run goes on and the result
// says it is running.
func (c *Core) rerun(ctx context.Context, a *agent, run fold.Run, by string, keep bool) (TurnResult, error) {
	done, err := c.startRerun(a, run, by, keep)
	if err != nil {
		return TurnResult{}, err
	}
	select {
	case res := <-done:
		return res, nil
	case <-ctx.Done():
		return TurnResult{RunID: run.RunID, Status: "running"}, nil
	}
}

// startRerun claims a, puts its workspace back to the run's start
// (unless keep), logs run.resumed and starts the re-run of its
// interrupted run; the channel yields the turn's result.
func (c *Core) startRerun(a *agent, run fold.Run, by string, keep bool) (<-chan TurnResult, error) {
	if !interrupted(run) {
		return nil, failf(ErrWrongState,
			"agent %s has no interrupted run to resume; to answer a wait pass --token and a response", a.Name())
	}
	if err := a.Claim(); err != nil {
		return nil, err
	}
	if !keep {
		if err := c.restoreRun(c.ctx, a, run.RunID); err != nil {
			c.release(a)
			return nil, err
		}
	}
	timedOut := run.Reason == schema.ReasonWaitTimeout
	if _, err := a.Append(schema.RunResumed, schema.RunResumedData{RunID: run.RunID, By: by, TimedOut: timedOut}); err != nil {
		c.release(a)
		return nil, logFailure(fmt.Errorf("logging run.resumed: %w", err))
	}
	return c.startRun(a, run, "", keep), nil
}

// cancelTurn cancels a's running turn (s.Turn) and returns once it has
// ended. The turn may have suspended its run before the cancel reached it
// (its await_input came first, or a worker answered the turn after its
// hand-back): then goOn is true and next holds the wait it left, which is
// what there is to cancel now, once the turn's aftermath is done. Only
// that turn's wait: a claim since (an answer that resumed the run, a new
// run) is not what the operator cancelled.
func (c *Core) cancelTurn(ctx context.Context, a *agent, s waitState) (next waitState, goOn bool, err error) {
	runID, claim := s.Turn.RunID, s.Claims
	s.Turn.Cancel()
	select {
	case <-s.Turn.Done:
	case <-ctx.Done():
		return s, false, ctx.Err()
	}
	if err := a.OwedErr(); err != nil {
		return s, false, err
	}
	s, err = c.waitAgent(ctx, a, func(s waitState) bool { return s.Claims != claim || !s.Busy && !s.Settling })
	if err != nil {
		return s, false, err
	}
	return s, s.Claims == claim && s.Turn == nil && s.LiveWait && s.Run.RunID == runID, nil
}

// Cancel cancels an agent's running turn (and returns once it ended), or
// its wait, or closes its interrupted run; the agent becomes idle.
func (c *Core) Cancel(ctx context.Context, agentID string) error {
	a, ok := c.agent(agentID)
	if !ok {
		return notFound(agentID)
	}
	s := a.WaitState()
	if s.Turn != nil {
		next, goOn, err := c.cancelTurn(ctx, a, s)
		if err != nil || !goOn {
			return err
		}
		s = next
	}
	run := s.Run
	if run.RunID == "" || run.Ended {
		return failf(ErrWrongState, "agent %s has no running turn or wait to cancel", a.Name())
	}
	if err := a.Claim(); err != nil {
		return err
	}
	defer c.release(a)
	// A turn whose end could not be logged: writing that end is the
	// cancel.
	if a.Owed() {
		if err := c.flushOwed(a); err != nil {
			return a.OwedErr()
		}
		return nil
	}
	if s.LiveWait {
		if err := c.revokeToken(a, run.Wait.TokenID, run.RunID, schema.RevokeCancelled); err != nil {
			return err
		}
	}
	// A wait's cancel owes the notices of waiting -> idle in its write.
	var owed []eventlog.Record
	if s.LiveWait {
		owed = c.noticesFor(a, schema.StateWaiting, schema.StateIdle, transitionKey(run.RunID, run.Turn))
	}
	if _, err := appendOwed(a.Log, owed, eventlog.Record{Event: schema.TurnCancelled,
		Data: schema.TurnCancelledData{RunID: run.RunID, Turn: run.Turn}}); err != nil {
		return logFailure(fmt.Errorf("logging turn.cancelled for agent %s: %w; the run is still open in the log and nothing else changed; retry agent cancel once the log accepts appends", a.Name(), err))
	}
	c.saveSession(a, func(s *session.Session) { s.State = session.StateIdle; s.Run = nil })
	if s.LiveWait {
		c.notify(a) // waiting -> idle
	}
	return nil
}

// waitState is what a resume or a cancel reads of its agent at its start,
// in one look under the record's lock (agent.WaitState).
type waitState struct {
	// Run is the agent's latest run (zero when it has none).
	Run fold.Run
	// LiveWait: Run waits on a live token.
	LiveWait bool
	// Busy: a turn runs or is being started or unwound.
	Busy bool
	// Turn is the turn the agent runs now (nil when none).
	Turn *turnRef
	// Settling: a turn has ended and its aftermath (notices, deferred
	// spawns, the next wake) still runs.
	Settling bool
	// Claims counts the agent's claims (turns, resumes, cancels) so far.
	Claims uint64
}

// turnRef is a running turn of run RunID: Cancel stops it, Done is closed
// when it ended.
type turnRef struct {
	RunID  string
	Cancel func()
	Done   <-chan struct{}
}

// resumes is an agent's resume bookkeeping, with a leaf lock of its own:
// the secrets minted in its runs until handed out (by the turn's result,
// or the live run.waiting event), and the results a repeated resume
// shares. No method calls out while holding the lock, so it may be taken
// under the record's lock and under the bus's.
type resumes struct {
	mu      sync.Mutex
	secrets map[string]string        // run id -> secret minted in it
	done    map[string]chan struct{} // token id -> closed when its resume's turn ended
	out     map[string]TurnResult    // token id -> that turn's result
}

// Mint keeps the secret minted for run runID until it is handed out.
func (r *resumes) Mint(runID, secret string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.secrets == nil {
		r.secrets = map[string]string{}
	}
	r.secrets[runID] = secret
}

// Drop forgets the secret of run runID (its wait was not logged).
func (r *resumes) Drop(runID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.secrets, runID)
}

// Take hands out the secret of run runID, once ("" when there is none).
func (r *resumes) Take(runID string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.secrets[runID]
	delete(r.secrets, runID)
	return s
}

// Secret is the secret of run runID without taking it (the live
// run.waiting event shows it).
func (r *resumes) Secret(runID string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.secrets[runID]
}

// Open says a resume with token tokenID started its turn: repeats wait
// for its result (Shared).
func (r *resumes) Open(tokenID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done == nil {
		r.done = map[string]chan struct{}{}
	}
	r.done[tokenID] = make(chan struct{})
}

// Finish records the result of the turn the resume with token tokenID
// started and lets its repeats have it.
func (r *resumes) Finish(tokenID string, res TurnResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.out == nil {
		r.out = map[string]TurnResult{}
	}
	r.out[tokenID] = res
	if ch := r.done[tokenID]; ch != nil {
		select {
		case <-ch:
		default:
			close(ch)
		}
	}
}

// Shared is the result of the resume with token tokenID, waiting (bounded
// by ctx) while its turn runs; live is false when this process started no
// such resume.
func (r *resumes) Shared(ctx context.Context, tokenID string) (res TurnResult, live bool, err error) {
	r.mu.Lock()
	ch, live := r.done[tokenID]
	r.mu.Unlock()
	if !live {
		return res, false, nil
	}
	select {
	case <-ch:
	case <-ctx.Done():
		return res, true, ctx.Err()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out[tokenID], true, nil
}
