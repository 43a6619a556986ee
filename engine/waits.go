package engine

import (
	"context"
	"time"

	"github.com/warren-dev/warren/engine/internal/notice"
	"github.com/warren-dev/warren/engine/internal/views"
	"github.com/warren-dev/warren/engine/internal/waits"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/inbox"
	fold "github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/session"
	"github.com/warren-dev/warren/tools"
	"github.com/warren-dev/warren/tree"
)

// The waits of the agents (await_input, resume, cancel, the deadline
// sweep) are decided and ordered in package waits; the Core looks the
// agent up and carries out each step through waitAgent below.

// waitOps is package waits over the Core's token service and clock.
func (c *Core) waitOps() waits.Waits[TurnResult] {
	return waits.Waits[TurnResult]{Tokens: c.tokens, Now: c.now, Result: resumeResult}
}

// resumeResult is the result of a resume answered without a turn of its
// own.
func resumeResult(runID string, status session.Status, response string) TurnResult {
	return TurnResult{Response: response, RunID: runID, Status: status}
}

// beginWait suspends the run: it mints a resume token, logs run.waiting and
// token.minted in one write, and ends the turn (ErrRunSuspended).
func (c *Core) beginWait(a *agent, v tools.AwaitInput, cc callCtx) error {
	deadline, err := c.waitOps().Begin(waitAgent{a, c}, v, cc.runID, cc.turn)
	if err != nil {
		return err
	}
	c.armDeadline(deadline)
	c.noticeWaitOf(a)
	return provider.ErrRunSuspended
}

// armDeadline schedules a sweep for the first instant a wait is overdue.
func (c *Core) armDeadline(deadline time.Time) {
	c.waitOps().Arm(c.sched.At, deadline, c.sweepWaits)
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
	c.waitOps().Sweep(func(id string) (waits.Agent[TurnResult], bool) {
		a, ok := c.agent(id)
		if !ok {
			return nil, false
		}
		return waitAgent{a, c}, true
	})
}

// revokeToken revokes a live token (token.revoked with the reason).
func (c *Core) revokeToken(a *agent, tokenID, runID, reason string) error {
	return c.waitOps().Revoke(waitAgent{a, c}, tokenID, runID, reason)
}

// Resume resumes a suspended run (token and response) or re-runs an
// interrupted one (no token). It returns when the resumed turn ends.
func (c *Core) Resume(ctx context.Context, agentID, presented, response string) (TurnResult, error) {
	return c.resume(ctx, agentID, waits.Request{Presented: presented, Response: response})
}

// ResumeByID answers the wait whose public token id is tokenID, as the
// operator may from a local peer (SPEC 4). Only a live wait is answered: a
// token id of a wait that has ended, a repeat included, is code 5.
func (c *Core) ResumeByID(ctx context.Context, agentID, tokenID, response string) (TurnResult, error) {
	if tokenID == "" {
		return TurnResult{}, failf(ErrInvalid, "an empty token_id names no wait; list the pending waits with warren waits")
	}
	return c.resume(ctx, agentID, waits.Request{TokenID: tokenID, Response: response})
}

func (c *Core) resume(ctx context.Context, agentID string, req waits.Request) (TurnResult, error) {
	a, ok := c.agent(agentID)
	if !ok {
		return TurnResult{}, notFound(agentID)
	}
	return c.waitOps().Resume(ctx, waitAgent{a, c}, req)
}

// Cancel cancels an agent's running turn, or its wait, or closes an
// interrupted run; the agent becomes idle.
func (c *Core) Cancel(ctx context.Context, agentID string) error {
	a, ok := c.agent(agentID)
	if !ok {
		return notFound(agentID)
	}
	return c.waitOps().Cancel(ctx, waitAgent{a, c})
}

// waitAgent is an agent as package waits acts on it: its record, and the
// steps that need the Core.
type waitAgent struct {
	*agent
	c *Core
}

func (w waitAgent) State() waits.State { return w.WaitState() }
func (w waitAgent) Release()           { w.c.release(w.agent) }
func (w waitAgent) FlushOwed() error   { return w.c.flushOwed(w.agent) }
func (w waitAgent) Notices(from, to, key string) []eventlog.Record {
	return w.c.noticesFor(w.agent, from, to, key)
}

func (w waitAgent) Start(run fold.Run, from string) <-chan TurnResult {
	return w.c.startTurn(w.agent, TurnRequest{Prompt: run.Prompt, MessageIDs: run.MessageIDs, Provider: run.Provider,
		Model: run.Model, RunID: run.RunID, Turn: run.Turn, From: from})
}

func (w waitAgent) Changed() <-chan struct{} { return w.c.changed.Wait() }

func (w waitAgent) Cancelled(waited bool) {
	w.c.saveSession(w.agent, func(s *session.Session) { s.State = session.StateIdle; s.Run = nil })
	if waited {
		w.c.notify(w.agent) // waiting -> idle
	}
}

func (w waitAgent) Expired() {
	w.c.saveSession(w.agent, func(s *session.Session) { s.State = session.StateIdle })
	w.c.notify(w.agent) // waiting -> idle
	w.c.wake(w.agent)
}

// The core's timers run on its scheduler (c.sched, package schedule), on
// the clock CoreOptions.Clock gives. Timers an agent owns are armed under
// its id, so that terminating it cancels them (CancelOwner); the core's own
// are armed under the empty owner. Wait deadlines are anonymous: a sweep
// that finds nothing to expire is harmless. Reminders name their timers
// (reminders.Timer).

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
	if w, ok := views.Wait(c.views().Snapshot(a)); ok {
		c.noticeWait(w)
	}
}
