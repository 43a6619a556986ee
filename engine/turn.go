package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/warren-dev/warren/engine/internal/agentload"
	"github.com/warren-dev/warren/engine/internal/retry"
	"github.com/warren-dev/warren/history"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/session"
)

// TurnRequest starts (or re-runs) a turn.
type TurnRequest struct {
	Prompt     string
	MessageIDs []string
	Provider   string
	Model      string
	// OnChunk receives response text as it is produced (a streaming
	// client). Once a chunk reached it, the turn is no longer retried.
	OnChunk func(string)
	// OnRetry, when set, is told of each retry once its turn.retry is
	// logged, before the backoff (a client shows the progress).
	OnRetry func(RetryNotice)
	// RunID and Turn re-run an earlier run (resume); empty for a new run.
	RunID string
	Turn  int
	// From is the subscription state the agent leaves ("idle" or
	// "waiting").
	From string
}

// TurnResult is how a turn ended.
type TurnResult struct {
	Response string
	RunID    string
	Status   string // "idle" after success, failure or cancel; "suspended" when waiting
	Token    string // the resume token, once, when the run suspended
	Wait     *WaitInfo
	Err      error
	// Set by Send: the wait its message revoked ({token_id, kind}) and the
	// run interrupted by a restart that it abandoned (a new run started).
	RevokedWait  *WaitInfo
	AbandonedRun string
}

// Outcomes of a turn attempt loop.
const (
	outComplete  = "complete"
	outFailed    = "failed"
	outCancelled = "cancelled"
	outSuspended = "suspended"
)

// claim marks an agent busy for a turn; it fails when the agent cannot run
// one now.
func (c *Core) claim(a *agent) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.corrupt != nil:
		if errors.Is(a.corrupt, agentload.ErrUnopened) {
			return failf(ErrUnavailable, "agent %s: %w", a.id, a.corrupt)
		}
		return failf(ErrWrongState, "agent %s has a damaged log: %w; run `warren repair %s`", a.id, a.corrupt, a.id)
	case a.p.Terminated:
		return failf(ErrWrongState, "agent %s (%s) is terminated", a.p.Name, a.id)
	case a.released != nil:
		return failf(ErrUnavailable, "agent %s (%s) is no longer run by this daemon: %v", a.p.Name, a.id, a.released)
	case a.busy:
		return failf(ErrWrongState, "agent %s (%s) is mid-turn; wait for it or cancel it (warren agent cancel)", a.p.Name, a.id)
	}
	a.busy = true
	return nil
}

// release undoes a claim that started no turn.
func (c *Core) release(a *agent) {
	a.mu.Lock()
	a.busy = false
	a.mu.Unlock()
	c.wake(a)
}

// startTurn runs a claimed agent's turn in the background and returns a
// channel that yields its result.
func (c *Core) startTurn(a *agent, req TurnRequest) <-chan TurnResult {
	out := make(chan TurnResult, 1)
	if !c.goBackground(func() { out <- c.runTurn(a, req) }) {
		c.release(a)
		out <- TurnResult{Err: failf(ErrShuttingDown, "daemon is shutting down")}
	}
	return out
}

// runTurn runs one turn of a claimed agent to its end.
func (c *Core) runTurn(a *agent, req TurnRequest) (res TurnResult) {
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	a.mu.Lock()
	provName, model := req.Provider, req.Model
	if provName == "" {
		provName = a.p.Provider
	}
	if model == "" && provName == a.p.Provider {
		model = a.p.Model
	}
	if model == "" {
		model = c.providers.DefaultModel(provName)
	}
	runID, turn := req.RunID, req.Turn
	if runID == "" {
		runID, turn = newID(), a.p.TurnNo+1
	}
	at := &activeTurn{runID: runID, turn: turn, rerun: req.RunID != "", cancel: cancel, done: make(chan struct{})}
	a.cur = at
	// A release between the claim and here found no turn to cancel: it
	// is seen now, under the same lock, and the turn does not start.
	released := a.released
	a.mu.Unlock()
	res.RunID = runID
	from := req.From
	if from == "" {
		from = "idle"
	}
	outcome := outFailed
	defer func() {
		close(at.done)
		c.finishTurn(a, outcome, from)
	}()

	if released != nil {
		res.Err = failf(ErrUnavailable, "agent %s is no longer run by this daemon: %v", a.id, released)
		outcome = ""
		return res
	}
	if _, err := c.provider(provName); err != nil {
		res.Err = err
		outcome = ""
		return res
	}
	// The end of an earlier run that could not be logged goes first.
	if err := c.flushOwed(a); err != nil {
		res.Err = logFailure(fmt.Errorf("agent %s cannot start a turn: %w", a.id, err))
		outcome = ""
		return res
	}
	if _, err := a.log.Append(schema.TurnStart, schema.TurnStartData{RunID: runID, Turn: turn, BootID: c.bootID,
		Prompt: req.Prompt, Provider: provName, Model: model, MessageIDs: nonNil(req.MessageIDs)}); err != nil {
		res.Err = logFailure(fmt.Errorf("logging turn.start for agent %s: %w", a.id, err))
		outcome = ""
		return res
	}
	c.saveSession(a, func(s *session.Session) {
		s.State = session.StateRunning
		s.Provider, s.Model = provName, model
		s.Run = &session.Run{RunID: runID, BootID: c.bootID, StartedAt: c.now().UTC()}
	})
	c.fireTransition(a, from, "busy")

	var usage provider.Usage
	response, attempts, err := c.attempts(ctx, a, req, provName, model, runID, turn, &usage)
	outcome = c.endTurn(ctx, a, runID, turn, response, attempts, usage, err, &res)
	return res
}

// endTurn logs how the turn's attempts ended (turn.complete, the wait that
// suspended the run, turn.cancelled or turn.failed), fills in res and
// returns the outcome finishTurn acts on ("" when the end could not be
// logged: it is owed, degraded.go).
func (c *Core) endTurn(ctx context.Context, a *agent, runID string, turn int, response string, attempts int,
	usage provider.Usage, err error, res *TurnResult) (outcome string) {
	switch {
	case err == nil:
		outcome = outComplete
		done := schema.TurnCompleteData{RunID: runID, Turn: turn, Response: response}
		if !usage.IsZero() {
			done.Usage = &usage
		}
		if _, lerr := a.log.Append(schema.TurnComplete, done); lerr != nil {
			// Not durable, so not complete: the run ends as failed once the
			// log takes it.
			a.owe(runID, schema.TurnFailed, schema.TurnFailedData{RunID: runID, Turn: turn, Attempts: attempts,
				Error: "the turn's result could not be logged: " + lerr.Error()}, lerr)
			res.Err = logFailure(fmt.Errorf("logging turn.complete for agent %s: %w", a.id, lerr))
			return ""
		}
		res.Response, res.Status = response, "idle"
	case errors.Is(err, provider.ErrRunSuspended):
		outcome = outSuspended
		res.Status = "suspended"
		a.mu.Lock()
		if r := a.p.RunFor(runID); r != nil && r.Wait != nil {
			res.Wait = waitView(r.Wait, runID)
		}
		res.Token = a.takeMintedSecret(runID)
		a.mu.Unlock()
	case ctx.Err() != nil || errors.Is(err, context.Canceled):
		outcome = outCancelled
		if _, lerr := a.log.Append(schema.TurnCancelled, schema.TurnCancelledData{RunID: runID, Turn: turn}); lerr != nil {
			c.log.Error("logging turn.cancelled", "agent", a.id, "err", lerr)
			a.owe(runID, schema.TurnCancelled, schema.TurnCancelledData{RunID: runID, Turn: turn}, lerr)
			outcome = ""
		}
		res.Status = "idle"
		res.Err = failf(ErrWrongState, "turn cancelled")
	default:
		outcome = outFailed
		failed := schema.TurnFailedData{RunID: runID, Turn: turn, Error: err.Error(), Attempts: attempts}
		if _, lerr := a.log.Append(schema.TurnFailed, failed); lerr != nil {
			c.log.Error("logging turn.failed", "agent", a.id, "err", lerr)
			a.owe(runID, schema.TurnFailed, failed, lerr)
			outcome = ""
		}
		res.Status = "idle"
		res.Err = err
	}
	return outcome
}

// attempts calls the provider, retrying transient errors with exponential
// backoff and jitter while no output of the attempt reached a client
// (package retry), on the agent's session, which is discarded after an
// attempt that leaves it unusable.
func (c *Core) attempts(ctx context.Context, a *agent, req TurnRequest, provName, model, runID string, turn int, usage *provider.Usage) (string, int, error) {
	lease, err := c.acquireSession(ctx, a, provName, model)
	if err != nil {
		return "", 0, err
	}
	discard := false
	defer func() {
		if discard {
			lv := lease.Value()
			lease.Discard()
			_ = lv.sess.Stop()
		} else {
			lease.Release()
		}
	}()
	cfg := c.config()
	delivered := false
	onChunk := func(s string) {
		c.bus.PublishDelta(a.id, runID, s)
		if req.OnChunk != nil {
			delivered = true
			req.OnChunk(s)
		}
	}
	policy := retry.Policy{MaxRetries: cfg.MaxRetries, Base: cfg.RetryBaseDelay, Timeout: cfg.TurnTimeout,
		Jitter: c.opts.Jitter, Sleep: c.opts.Sleep}
	out := policy.Run(ctx, func() retry.Try {
		lv := lease.Value()
		prompt := req.Prompt
		if lv.inject != nil {
			prompt = history.Block(*lv.inject, req.Prompt, history.BlockOptions{})
		}
		resp, timedOut, drainFailed, err := c.sendOnce(ctx, a, lv, prompt, runID, turn, cfg.TurnTimeout,
			provider.TurnIO{OnChunk: onChunk, OnUsage: func(u provider.Usage) { *usage = usage.Add(u) }})
		if err == nil {
			lv.inject = nil
		}
		return retry.Try{Response: resp, Err: err, TimedOut: timedOut, DrainFailed: drainFailed}
	}, func() bool { return delivered }, func(attempt int, err error, delay time.Duration) error {
		if _, lerr := a.log.Append(schema.TurnRetry, schema.TurnRetryData{RunID: runID, Turn: turn, Attempt: attempt,
			Error: err.Error(), DelayMS: delay.Milliseconds()}); lerr != nil {
			return fmt.Errorf("logging turn.retry: %w (after %v)", lerr, err)
		}
		c.log.Warn("transient provider error; retrying", "agent", a.id, "attempt", attempt, "delay", delay, "err", err)
		if req.OnRetry != nil {
			req.OnRetry(RetryNotice{RunID: runID, Turn: turn, Attempt: attempt, MaxRetries: cfg.MaxRetries,
				Error: err.Error(), Delay: delay})
		}
		return nil
	})
	discard = out.Discard
	return out.Response, out.Attempts, out.Err
}

// sendOnce runs one attempt of a turn on the live session: the prompt,
// the tool calls the provider makes (through the attempt's runTools, which
// calls made over the socket with the agent's credential join), within the
// turn timeout. timedOut says the timeout ended it; drainFailed that a
// call's tool.call could not be logged (err says why), so the provider
// session, which counts the turn as done, must not be kept.
func (c *Core) sendOnce(ctx context.Context, a *agent, lv *live, prompt, runID string, turn int, timeout time.Duration,
	io provider.TurnIO) (resp string, timedOut, drainFailed bool, err error) {
	tools := c.newRunTools(a, runID, turn)
	io.Tools = tools
	// A call made over the socket with the agent's credential that
	// suspends the run ends the attempt through suspend.
	sctx, suspend := context.WithCancelCause(ctx)
	actx, acancel := sctx, context.CancelFunc(func() {})
	if timeout > 0 {
		actx, acancel = context.WithTimeout(sctx, timeout)
	}
	tools.door.Open(actx, suspend)
	a.setTurnTools(runID, tools)
	resp, err = lv.sess.Send(actx, prompt, io)
	timedOut = actx.Err() == context.DeadlineExceeded && ctx.Err() == nil
	a.setTurnTools(runID, nil)
	if serr := tools.door.Close(); serr != nil {
		err = serr
	}
	acancel()
	suspend(nil)
	// The attempt's calls are in the log before whatever ends it.
	if derr := tools.Drain(); derr != nil && err == nil {
		// The provider session counts the turn as done; the log does
		// not: a fresh session rebuilds the history from the log.
		return resp, timedOut, true, derr
	}
	return resp, timedOut, false, err
}

// finishTurn ends a turn: session.json, subscriptions, deferred work
// (spawns, completion), and the next wake.
func (c *Core) finishTurn(a *agent, outcome, from string) {
	state := session.StateIdle
	to := "idle"
	if outcome == outSuspended {
		state, to = session.StateSuspended, "waiting"
	}
	a.mu.Lock()
	var wait *session.Wait
	if r := a.p.Run; r != nil && r.Wait != nil && r.Wait.TokenState == tokLive {
		wait = &session.Wait{Kind: r.Wait.Kind, Prompt: r.Wait.Prompt, TokenID: r.Wait.TokenID,
			SecretHash: r.Wait.SecretHash, Deadline: r.Wait.Deadline}
	}
	a.mu.Unlock()
	if outcome != "" {
		c.saveSession(a, func(s *session.Session) {
			s.State = state
			if state == session.StateSuspended && s.Run != nil {
				s.Run.Wait = wait
			} else if state == session.StateIdle {
				s.Run = nil
			}
		})
	}
	a.mu.Lock()
	a.cur = nil
	a.busy = false
	a.settling = true
	a.held = outcome == outFailed
	deferred := a.deferred
	a.deferred = nil
	completing := a.completing
	a.mu.Unlock()
	// At rest now: the turn's last entries were logged while it was busy.
	c.checkpointSoon(a)
	if outcome != "" {
		c.fireTransition(a, "busy", to)
	}
	for _, f := range deferred {
		f()
	}
	defer c.changed.Fire()
	defer func() {
		// Before changed fires: a waiter woken by it sees the aftermath done.
		a.mu.Lock()
		a.settling = false
		a.mu.Unlock()
	}()
	if completing {
		if err := c.terminate(a); err != nil {
			c.log.Error("terminating a completed agent", "agent", a.id, "err", err)
		}
		return
	}
	if outcome == outFailed {
		c.notifyParentOfFailure(a)
	}
	c.wake(a)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
