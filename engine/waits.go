package engine

import (
	"errors"
	"fmt"
	"time"

	"github.com/warren-dev/warren/engine/internal/notice"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/session"
	"github.com/warren-dev/warren/token"
	"github.com/warren-dev/warren/tools"
	"github.com/warren-dev/warren/tree"
)

// An agent's waits: a run suspended on await_input until a human answers,
// a deadline passes or the wait is revoked (SPEC 4).
//
//   - beginWait mints the resume token (package token), logs run.waiting
//     and token.minted in one write and registers the token; the secret
//     is kept (the record's resumes) until the turn's result hands it out.
//   - Resume and Cancel (resume.go) answer and end them.
//   - sweepWaits expires the waits whose deadline passed (run.interrupted
//     with reason wait_timeout and token.expired in one write);
//     armDeadline schedules it at a deadline.
//
// The token service locks each token across its commit, which claims the
// agent and appends to its log.

// defaultWaitTimeout applies to await_input without a timeout.
const defaultWaitTimeout = 24 * time.Hour

// beginWait suspends run runID (its turn turn) on v: it mints a resume
// token with the deadline v's timeout sets, keeps the secret in the
// agent's resumes, logs run.waiting and token.minted in one write,
// registers the token, arms the deadline, tells USER, and ends the turn
// (provider.ErrRunSuspended).
func (c *Core) beginWait(a *agent, v tools.AwaitInput, runID string, turn int) error {
	timeout := v.Timeout
	if timeout <= 0 {
		timeout = defaultWaitTimeout
	}
	deadline := c.now().UTC().Add(timeout)
	tok, secret, err := token.Mint(a.ID(), runID, deadline)
	if err != nil {
		return fmt.Errorf("minting a resume token: %w", err)
	}
	a.Resumes().Mint(runID, secret)
	// The turn's end delivers the notices of busy -> waiting.
	_, err = a.AppendBatch(append([]eventlog.Record{
		{Event: schema.RunWaiting, Data: schema.RunWaitingData{RunID: runID, WaitKind: v.Kind, Prompt: v.Prompt,
			TokenID: tok.ID, Deadline: deadline.Format(time.RFC3339Nano), SecretHash: tok.SecretHash, Turn: turn}},
		{Event: schema.TokenMinted, Data: schema.TokenData{TokenID: tok.ID, RunID: runID}},
	}, c.noticesFor(a, schema.StateBusy, schema.StateWaiting, transitionKey(runID, turn))...))
	if err != nil {
		a.Resumes().Drop(runID)
		return fmt.Errorf("logging run.waiting: %w", err)
	}
	if err := c.tokens.Add(tok); err != nil {
		return fmt.Errorf("registering the resume token: %w", err)
	}
	c.armDeadline(deadline)
	c.noticeWaitOf(a)
	return provider.ErrRunSuspended
}

// armDeadline schedules a sweep for the first instant a wait with this
// deadline is overdue: a token expires once the clock is past its
// deadline. Should the sweep find the clock not past it yet (the wall
// clock stepped back), it arms itself again.
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

// sweepWaits expires every live wait whose deadline passed:
// run.interrupted (wait_timeout) and token.expired in the agent's log in
// one write (with the notices of waiting -> idle it owes); then
// session.json says idle, the notices are delivered and, under the
// resume policy auto, the run is re-run with its wait answered by the
// timeout. A token of an agent that is gone expires with nothing written; a
// wait whose write fails stays live for the next sweep.
func (c *Core) sweepWaits() {
	expired := c.tokens.Expire(c.now(), func(t token.Token) error {
		a, ok := c.agent(t.AgentID)
		if !ok {
			return nil
		}
		_, err := a.AppendBatch(append([]eventlog.Record{
			{Event: schema.RunInterrupted, Data: schema.RunInterruptedData{RunID: t.RunID, Reason: schema.ReasonWaitTimeout}},
			{Event: schema.TokenExpired, Data: schema.TokenData{TokenID: t.ID, RunID: t.RunID}},
		}, c.noticesFor(a, schema.StateWaiting, schema.StateIdle, transitionKey(t.RunID, a.WaitState().Run.Turn))...))
		return err
	})
	for _, t := range expired {
		if a, ok := c.agent(t.AgentID); ok {
			c.saveSession(a, func(s *session.Session) { s.State = session.StateIdle })
			c.notify(a) // waiting -> idle
			// The run moves on by itself under the resume policy
			// (recovery does it for what it expires, once it is done).
			if !c.agents.WakesHeld() {
				c.autoResume([]*agent{a})
			}
		}
	}
}

// revokeToken revokes a live wait's token (token.revoked with reason); a
// token that is no longer live is left as it is.
func (c *Core) revokeToken(a *agent, tokenID, runID, reason string) error {
	err := c.tokens.Revoke(tokenID, reason, func(token.Token) error {
		_, err := a.Append(schema.TokenRevoked, schema.TokenData{TokenID: tokenID, RunID: runID, Reason: reason})
		return err
	})
	if err != nil && !errors.Is(err, token.ErrRejected) {
		return fmt.Errorf("revoking token %s: %w", tokenID, err)
	}
	return nil
}

// The core's timers run on its scheduler (c.sched, package schedule), on
// the clock CoreOptions.Clock gives. Timers an agent owns are armed under
// its id, so that terminating it cancels them (CancelOwner); the core's own
// are armed under the empty owner. Wait deadlines are anonymous: a sweep
// that finds nothing to expire is harmless. Reminders name their timers
// (reminderTimer).

// sweepTimer names the periodic sweep (SweepEvery) under the empty owner.
const sweepTimer = "sweep"

// noticeWait tells the operator, in the USER inbox, that a wait began: the
// agent's path, kind, prompt, token id and deadline, and the command that
// answers it; never the secret. The message id derives from the token id,
// so a notice repeated (at recovery) is not enqueued twice.
func (c *Core) noticeWait(w WaitView) {
	text := notice.WaitBegan(w.Path, w.Kind, w.Prompt, w.TokenID, w.Deadline)
	m := c.newMessage(notice.ID("wait", w.TokenID), tree.System, tree.User, inbox.KindNotification, text)
	m.Metadata["token_id"] = w.TokenID
	m.Metadata["waiting_agent"] = w.AgentID
	if err := c.enqueue(m); err != nil {
		c.log.Error("telling USER a wait began", "agent", w.AgentID, "token_id", w.TokenID, "err", err)
	}
}

// noticeWaits makes sure the USER inbox has a notice for every pending
// wait (a crash may have cut one off between run.waiting and the notice).
func (c *Core) noticeWaits() {
	for _, w := range c.Waits() {
		c.noticeWait(w)
	}
}

// noticeWaitOf sends the notice of a's wait that just began.
func (c *Core) noticeWaitOf(a *agent) {
	if w, ok := waitView(c.snapshot(a)); ok {
		c.noticeWait(w)
	}
}
