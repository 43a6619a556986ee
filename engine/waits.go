package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/session"
	"github.com/warren-dev/warren/token"
	"github.com/warren-dev/warren/tools"
)

// defaultWaitTimeout applies to await_input without a timeout.
const defaultWaitTimeout = 24 * time.Hour

// beginWait suspends the run: it mints a resume token, logs run.waiting and
// token.minted in one write, and ends the turn (ErrRunSuspended).
func (c *Core) beginWait(a *agent, v tools.AwaitInput, cc callCtx) error {
	timeout := v.Timeout
	if timeout <= 0 {
		timeout = defaultWaitTimeout
	}
	deadline := c.now().UTC().Add(timeout)
	tok, secret, err := token.Mint(a.id, cc.runID, deadline)
	if err != nil {
		return fmt.Errorf("minting a resume token: %w", err)
	}
	a.mu.Lock()
	a.secrets[cc.runID] = secret
	a.mu.Unlock()
	_, err = a.log.AppendBatch([]eventlog.Record{
		{Event: schema.RunWaiting, Data: schema.RunWaitingData{RunID: cc.runID, WaitKind: v.Kind, Prompt: v.Prompt,
			TokenID: tok.ID, Deadline: deadline.Format(time.RFC3339Nano), SecretHash: tok.SecretHash, Turn: cc.turn}},
		{Event: schema.TokenMinted, Data: schema.TokenData{TokenID: tok.ID, RunID: cc.runID}},
	})
	if err != nil {
		a.mu.Lock()
		delete(a.secrets, cc.runID)
		a.mu.Unlock()
		return fmt.Errorf("logging run.waiting: %w", err)
	}
	if err := c.tokens.Add(tok); err != nil {
		return fmt.Errorf("registering the resume token: %w", err)
	}
	c.armDeadline(deadline)
	c.noticeWaitOf(a)
	return provider.ErrRunSuspended
}

// armDeadline schedules a sweep for the first instant a wait is overdue
// (a token expires once the clock is past its deadline). Should the sweep
// find the clock not past it yet (the wall clock stepped back), it arms
// itself again.
func (c *Core) armDeadline(deadline time.Time) {
	c.sched.At(deadline.Add(time.Nanosecond), func() {
		c.sweepWaits()
		if !c.now().After(deadline) {
			c.armDeadline(deadline)
		}
	})
}

// SweepWaits expires every wait whose deadline passed: run.interrupted
// (wait_timeout) and token.expired in one write. Once the core is closed it
// does nothing, and Close waits for a sweep in progress.
func (c *Core) SweepWaits() { c.sched.Run(c.sweepWaits) }

// SweepEvery runs SweepWaits every interval on the core's clock until
// Close (the daemon's backstop for waits no deadline timer covers).
func (c *Core) SweepEvery(interval time.Duration) {
	var tick func()
	tick = func() {
		c.sweepWaits()
		c.sched.Arm("", sweepTimer, c.now().Add(interval), tick)
	}
	c.sched.Arm("", sweepTimer, c.now().Add(interval), tick)
}

// sweepWaits is SweepWaits on a goroutine the scheduler tracks already.
func (c *Core) sweepWaits() {
	expired := c.tokens.Expire(c.now(), func(t token.Token) error {
		a, ok := c.agent(t.AgentID)
		if !ok {
			return nil
		}
		_, err := a.log.AppendBatch([]eventlog.Record{
			{Event: schema.RunInterrupted, Data: schema.RunInterruptedData{RunID: t.RunID, Reason: schema.ReasonWaitTimeout}},
			{Event: schema.TokenExpired, Data: schema.TokenData{TokenID: t.ID, RunID: t.RunID}},
		})
		return err
	})
	for _, t := range expired {
		if a, ok := c.agent(t.AgentID); ok {
			c.saveSession(a, func(s *session.Session) { s.State = session.StateIdle })
			c.fireTransition(a, "waiting", "idle")
			c.wake(a)
		}
	}
}

// revokeToken revokes a live token (token.revoked with the reason).
func (c *Core) revokeToken(a *agent, tokenID, runID, reason string) error {
	err := c.tokens.Revoke(tokenID, reason, func(t token.Token) error {
		_, err := a.log.Append(schema.TokenRevoked, schema.TokenData{TokenID: tokenID, RunID: runID, Reason: reason})
		return err
	})
	if err != nil && !errors.Is(err, token.ErrRejected) {
		return fmt.Errorf("revoking token %s: %w", tokenID, err)
	}
	return nil
}

// Resume resumes a suspended run (token and response) or re-runs an
// interrupted one (no token). It returns when the resumed turn ends.
func (c *Core) Resume(ctx context.Context, agentID, presented, response string) (TurnResult, error) {
	return c.resume(ctx, agentID, presented, "", response)
}

// ResumeByID answers the wait whose public token id is tokenID, as the
// operator may from a local peer (SPEC 4). Only a live wait is answered: a
// token id of a wait that has ended, a repeat included, is code 5.
func (c *Core) ResumeByID(ctx context.Context, agentID, tokenID, response string) (TurnResult, error) {
	if tokenID == "" {
		return TurnResult{}, failf(ErrInvalid, "an empty token_id names no wait; list the pending waits with warren waits")
	}
	return c.resume(ctx, agentID, "", tokenID, response)
}

// resume is Resume (presented: the client string with the secret) or
// ResumeByID (tokenID: the public id); with neither it re-runs an
// interrupted run.
func (c *Core) resume(ctx context.Context, agentID, presented, tokenID, response string) (TurnResult, error) {
	a, ok := c.agent(agentID)
	if !ok {
		return TurnResult{}, notFound(agentID)
	}
	a.mu.Lock()
	var run runFacts
	if r := a.p.Run; r != nil {
		run = *r
	}
	a.mu.Unlock()
	if presented == "" && tokenID == "" {
		return c.resumeInterrupted(ctx, a, run)
	}
	runID := run.RunID
	if run.Wait == nil || run.Ended {
		// No wait now: only a repeat of a resume that consumed the token
		// can succeed; the token service decides.
		tokID := tokenID
		if presented != "" {
			var perr error
			if tokID, _, perr = token.Parse(presented); perr != nil {
				return TurnResult{}, failf(ErrTokenRejected, "%w", perr)
			}
		}
		t, known := c.tokens.Get(tokID)
		if !known {
			return TurnResult{}, failf(ErrTokenRejected, "token rejected: agent %s has no wait to resume", a.name())
		}
		runID = t.RunID
	}
	c.settleSuspending(ctx, a, runID)
	consume := func(commit func(token.Token) error) (token.Token, bool, error) {
		if tokenID != "" {
			t, err := c.tokens.ConsumeByID(a.id, runID, tokenID, response, c.now(), commit)
			return t, false, err
		}
		return c.tokens.Consume(a.id, runID, presented, response, c.now(), commit)
	}
	tok, repeat, err := consume(func(t token.Token) error {
		if err := c.claim(a); err != nil {
			return err
		}
		_, err := a.log.AppendBatch([]eventlog.Record{
			{Event: schema.TokenConsumed, Data: schema.TokenData{TokenID: t.ID, RunID: t.RunID}},
			{Event: schema.RunResumed, Data: schema.RunResumedData{RunID: t.RunID, TokenID: t.ID, Response: response}},
		})
		if err != nil {
			a.mu.Lock()
			a.busy = false
			a.mu.Unlock()
			return fmt.Errorf("logging the resume: %w", err)
		}
		a.mu.Lock()
		a.resumeRes[t.ID] = make(chan struct{})
		a.mu.Unlock()
		return nil
	})
	if err != nil {
		var de *domainError
		switch {
		case errors.As(err, &de):
			return TurnResult{}, err
		case errors.Is(err, token.ErrRejected):
			return TurnResult{}, failf(ErrTokenRejected, "%w", err)
		}
		return TurnResult{}, err
	}
	if repeat {
		return c.repeatResume(ctx, a, tok.ID, runID, run)
	}
	res := <-c.startTurn(a, TurnRequest{Prompt: run.Prompt, MessageIDs: run.MessageIDs, Provider: run.Provider,
		Model: run.Model, RunID: run.RunID, Turn: run.Turn, From: "waiting"})
	a.mu.Lock()
	a.resumeOut[tok.ID] = res
	if ch := a.resumeRes[tok.ID]; ch != nil {
		close(ch)
	}
	a.mu.Unlock()
	return res, nil
}

// repeatResume answers a repeat of a successful resume (same token, same
// response) without starting anything new: with the first resume's result
// (waiting for it if its turn still runs, or from the log after a restart);
// by finishing the run if a restart cut the first resume's turn off; and
// with code 5 if that run ended without a result.
func (c *Core) repeatResume(ctx context.Context, a *agent, tokenID, runID string, run runFacts) (TurnResult, error) {
	a.mu.Lock()
	ch, live := a.resumeRes[tokenID]
	a.mu.Unlock()
	if live {
		select {
		case <-ch:
		case <-ctx.Done():
			return TurnResult{}, ctx.Err()
		}
		a.mu.Lock()
		res := a.resumeOut[tokenID]
		a.mu.Unlock()
		return res, nil
	}
	a.mu.Lock()
	lr := a.p.LastResume
	a.mu.Unlock()
	if lr != nil && lr.TokenID == tokenID && lr.Completed {
		return TurnResult{Response: lr.Result, RunID: runID, Status: "idle"}, nil
	}
	if run.RunID == runID && !run.Ended && run.Interrupted && run.Reason == schema.ReasonProcessRestart {
		return c.resumeInterrupted(ctx, a, run)
	}
	return TurnResult{}, failf(ErrTokenRejected,
		"token rejected: %s was consumed, and its run ended without a result", tokenID)
}

// resumeInterrupted re-runs a run interrupted by a restart. Tool calls the
// log records for it are answered from the record.
func (c *Core) resumeInterrupted(ctx context.Context, a *agent, run runFacts) (TurnResult, error) {
	if run.RunID == "" || run.Ended || !run.Interrupted || run.Reason != schema.ReasonProcessRestart {
		return TurnResult{}, failf(ErrWrongState,
			"agent %s has no interrupted run to resume; to answer a wait pass --token and a response", a.name())
	}
	if err := c.claim(a); err != nil {
		return TurnResult{}, err
	}
	if _, err := a.log.Append(schema.RunResumed, schema.RunResumedData{RunID: run.RunID}); err != nil {
		c.release(a)
		return TurnResult{}, fmt.Errorf("logging run.resumed: %w", err)
	}
	select {
	case res := <-c.startTurn(a, TurnRequest{Prompt: run.Prompt, MessageIDs: run.MessageIDs, Provider: run.Provider,
		Model: run.Model, RunID: run.RunID, Turn: run.Turn}):
		return res, nil
	case <-ctx.Done():
		return TurnResult{RunID: run.RunID, Status: "running"}, nil
	}
}

// Cancel cancels an agent's running turn, or its wait, or closes an
// interrupted run; the agent becomes idle.
func (c *Core) Cancel(ctx context.Context, agentID string) error {
	a, ok := c.agent(agentID)
	if !ok {
		return notFound(agentID)
	}
	a.mu.Lock()
	cur := a.cur
	var run runFacts
	if r := a.p.Run; r != nil {
		run = *r
	}
	liveWait := a.hasLiveWait()
	a.mu.Unlock()
	if cur != nil {
		cur.cancel()
		select {
		case <-cur.done:
			return c.owedCancelErr(a)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if run.RunID == "" || run.Ended {
		return failf(ErrWrongState, "agent %s has no running turn or wait to cancel", a.name())
	}
	if err := c.claim(a); err != nil {
		return err
	}
	defer c.release(a)
	a.mu.Lock()
	_, _, _, owed := a.owed.Owed()
	a.mu.Unlock()
	if owed {
		// The run ended already; only its end is not logged yet.
		if err := c.flushOwed(a); err != nil {
			return c.owedCancelErr(a)
		}
		return nil
	}
	if liveWait {
		if err := c.revokeToken(a, run.Wait.TokenID, run.RunID, schema.RevokeCancelled); err != nil {
			return err
		}
	}
	if _, err := a.log.Append(schema.TurnCancelled, schema.TurnCancelledData{RunID: run.RunID, Turn: run.Turn}); err != nil {
		return logFailure(fmt.Errorf("logging turn.cancelled for agent %s: %w; the run is still open in the log and nothing else changed; retry agent cancel once the log accepts appends", a.name(), err))
	}
	c.saveSession(a, func(s *session.Session) { s.State = session.StateIdle; s.Run = nil })
	if liveWait {
		c.fireTransition(a, "waiting", "idle")
	}
	return nil
}
