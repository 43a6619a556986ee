package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/warren-dev/warren/engine/internal/retry"
	"github.com/warren-dev/warren/history"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/schema"
)

// attempts calls the provider, retrying transient errors with exponential
// backoff and jitter while no output of the attempt reached a client
// (package retry), on the agent's session, which is discarded after an
// attempt that leaves it unusable. Each attempt sends the prompt (with the
// history block a fresh session must carry once), within the turn
// timeout, with the attempt's tools open to calls made with the agent's
// credential; the calls are in the log before the attempt ends. Before a
// retry, turn.retry is logged and the client told.
func (c *Core) attempts(ctx context.Context, a *agent, req TurnRequest, t turnPlan, usage *provider.Usage, home *handed) (string, int, error) {
	// A spent budget suspends the run before its turn (budgets.go).
	if err := c.budgetGate(a, t); err != nil {
		return "", 0, err
	}
	sess, err := c.sessions.Acquire(ctx, a, t.Provider, t.Model)
	if err != nil {
		return "", 0, err
	}
	discard := false
	defer func() {
		if sess.lease != nil {
			sess.End(discard)
		}
	}()
	policy := c.retryPolicy()
	delivered := false
	onChunk := func(s string) {
		c.bus.PublishDelta(a.ID(), t.RunID, s)
		if req.OnChunk != nil {
			delivered = true
			req.OnChunk(s)
		}
	}
	onUsage := c.usageLogger(a, t, usage)
	attempt := 0
	out := policy.Run(ctx, func() retry.Try {
		attempt++
		// Only the last attempt's hand-back is the turn's end: an earlier
		// one's is in the worktree this attempt starts from.
		*home = handed{}
		// A session whose worker is gone (provider.Lost) is opened again,
		// on another worker or locally, restored from the log.
		if sess.lease == nil || sess.Lost() {
			if sess.lease != nil {
				c.log.Warn("provider session lost; opening it again", "agent", a.ID())
				sess.End(true)
				sess = turnSession{}
			}
			if sess, err = c.sessions.Acquire(ctx, a, t.Provider, t.Model); err != nil {
				return retry.Try{Err: err}
			}
		}
		prompt := req.Prompt
		if inject := sess.Inject(); inject != nil {
			prompt = history.Block(*inject, req.Prompt, history.BlockOptions{})
		}
		io := provider.TurnIO{OnChunk: onChunk, OnUsage: onUsage}
		worker, remote, away := sess.Away()
		if away {
			hand, err := c.handOut(ctx, a, t, attempt, remote)
			if err != nil {
				// The session is given up: its next open hands the
				// workspace over again, or runs it here.
				sess.End(true)
				sess = turnSession{}
				return retry.Try{Err: provider.Transient(err, 0)}
			}
			io.Workspace = hand
		}
		if away {
			a.setAway(t.RunID, worker)
		}
		resp, timedOut, drainFailed, err := c.sendOnce(ctx, a, sess, prompt, t, policy.Timeout, io)
		if err == nil {
			sess.Injected()
		}
		if away && (err == nil || io.Workspace.Snapshot != "") {
			err = c.cameHome(ctx, a, &sess, home, io.Workspace, worker, remote, err)
		}
		if away {
			a.setAway(t.RunID, "")
		}
		return retry.Try{Response: resp, Err: err, TimedOut: timedOut, DrainFailed: drainFailed}
	}, func() bool { return delivered }, func(attempt int, err error, delay time.Duration) error {
		if _, lerr := a.Append(schema.TurnRetry, schema.TurnRetryData{RunID: t.RunID, Turn: t.Turn, Attempt: attempt,
			Error: err.Error(), DelayMS: delay.Milliseconds()}); lerr != nil {
			return fmt.Errorf("logging turn.retry: %w (after %v)", lerr, err)
		}
		c.log.Warn("transient provider error; retrying", "agent", a.ID(), "attempt", attempt, "delay", delay, "err", err)
		if req.OnRetry != nil {
			req.OnRetry(RetryNotice{RunID: t.RunID, Turn: t.Turn, Attempt: attempt, MaxRetries: policy.MaxRetries,
				Error: err.Error(), Delay: delay})
		}
		return nil
	})
	discard = out.Discard
	return out.Response, out.Attempts, out.Err
}

// retryPolicy is the retry policy of the config in force.
func (c *Core) retryPolicy() retry.Policy {
	cfg := c.config()
	return retry.Policy{MaxRetries: cfg.MaxRetries, Base: cfg.RetryBaseDelay, Timeout: cfg.TurnTimeout,
		Jitter: c.opts.Jitter, Sleep: c.opts.Sleep}
}

// sendOnce runs one attempt of a turn on the live session: the prompt,
// the tool calls the provider makes (through the attempt's tools, which
// calls made with the agent's credential join), within the turn timeout.
// timedOut says the timeout ended it; drainFailed that a call's tool.call
// could not be logged (err says why), so the provider session, which
// counts the turn as done, must not be kept.
func (c *Core) sendOnce(ctx context.Context, a *agent, sess turnSession, prompt string, t turnPlan, timeout time.Duration,
	io provider.TurnIO) (resp string, timedOut, drainFailed bool, err error) {
	tools := c.newRunTools(a, t.RunID, t.Turn)
	io.Tools = tools
	io.BeforeRequest = func() error {
		err := c.budgetGate(a, t)
		tools.noteSuspended(err)
		return err
	}
	// A call made with the agent's credential that suspends the run ends
	// the attempt through suspend.
	sctx, suspend := context.WithCancelCause(ctx)
	actx, acancel := sctx, context.CancelFunc(func() {})
	if timeout > 0 {
		actx, acancel = context.WithTimeout(sctx, timeout)
	}
	// Open to calls made with the agent's credential while the attempt
	// runs (agentauth.go).
	tools.Door.Open(actx, suspend)
	a.setTurnTools(t.RunID, tools)
	resp, err = sess.Send(actx, prompt, io)
	timedOut = actx.Err() == context.DeadlineExceeded && ctx.Err() == nil
	a.setTurnTools(t.RunID, nil)
	tools.Door.Close()
	if serr := tools.suspendedBy(); serr != nil {
		resp, err = "", serr
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
