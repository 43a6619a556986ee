package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/registry"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/session"
	"github.com/warren-dev/warren/store"
)

// A turn of an agent (SPEC 7), from the claim's end to the next wake, on
// a goroutine of its own (runTurn):
//
//  1. The turn becomes the agent's running one; its run and provider are
//     chosen (chooseTurn: a new run, or the run a resume re-runs). An
//     agent this daemon may no longer run starts no turn.
//  2. The provider must be known; the end of an earlier run that could
//     not be logged is written first (the owed end); turn.start is
//     logged; session.json says running; subscribers see idle (or
//     waiting) -> busy.
//  3. The attempts (attempt.go) on the agent's provider session.
//  4. The end, by outcome (endTurn):
//     complete: turn.complete (with the usage), the response, status idle;
//     suspended: nothing logged here (await_input logged the wait), status
//     suspended, the wait and the resume secret, once;
//     cancelled: turn.cancelled, status idle, a wrong-state error; but a
//     turn the daemon's stop cut off is interrupted (run.interrupted,
//     shutdown: the next start re-runs it), never cancelled;
//     failed (a timeout given up on included): turn.failed with the error
//     and the attempts, status idle, the error.
//     An end that cannot be logged is owed (written when the log heals)
//     and the outcome is none, as it is for a turn that never started.
//  5. The aftermath (finishTurn): session.json (idle, or suspended with
//     its wait), the agent at rest (a failed turn holds the agent from
//     waking on the same messages), a checkpoint asked for, busy -> idle
//     (or waiting), the work deferred during the turn, then completion
//     (terminate) or, after a failure, the parent's notice, and the next
//     wake; last the agent stops settling and the change signal fires.
//
// No engine lock is held across these steps: each takes the record's
// lock for what it reads or writes, never across a log append or a
// provider call.

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
	// ResponseSeq is the seq of the turn.complete entry that holds
	// Response in the agent's log (0 when the turn did not complete), so
	// a reply too large for a frame can point to it.
	ResponseSeq uint64
	RunID       string
	Status      session.Status // idle after success, failure or cancel; suspended when waiting
	Token       string         // the resume token, once, when the run suspended
	Wait        *WaitInfo
	Err         error
	// Set by Send: the wait its message revoked ({token_id, kind}) and the
	// run interrupted by a restart that it abandoned (a new run started).
	RevokedWait  *WaitInfo
	AbandonedRun string
}

// RetryNotice describes one scheduled retry of a turn
// (TurnRequest.OnRetry).
type RetryNotice struct {
	RunID      string
	Turn       int
	Attempt    int // the attempt that failed (1-based)
	MaxRetries int
	Error      string
	Delay      time.Duration
}

// release undoes a claim (agent.Claim) that started no turn.
func (c *Core) release(a *agent) {
	a.Unclaim()
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

// runTurn runs one turn of a claimed agent to its end, aftermath
// included; the Core's context stops every turn.
func (c *Core) runTurn(a *agent, req TurnRequest) (res TurnResult) {
	ctx, cancel := context.WithCancelCause(c.ctx)
	defer cancel(nil)
	// A release between the claim and here found no turn to cancel:
	// StartTurn reports it, and the turn does not start. The config is
	// read once, before StartTurn takes the record's lock.
	cfg := c.config()
	t, running, released := a.StartTurn(req, cancel, func(name string) string { return registry.DefaultModel(cfg, name) }, newID)
	res.RunID = t.RunID
	from := req.From
	if from == "" {
		from = schema.StateIdle
	}
	outcome := outcomeFailed
	defer func() {
		running.End()
		c.finishTurn(a, outcome)
	}()

	if released != nil {
		res.Err = failf(ErrUnavailable, "agent %s is no longer run by this daemon: %v", a.ID(), released)
		outcome = outcomeNone
		return res
	}
	if _, err := c.provider(t.Provider); err != nil {
		res.Err = err
		outcome = outcomeNone
		return res
	}
	if err := c.awaitLease(ctx, a.ID()); err != nil {
		res.Err = err
		outcome = outcomeNone
		return res
	}
	// The end of an earlier run that could not be logged goes first.
	if err := c.flushOwed(a); err != nil {
		res.Err = logFailure(fmt.Errorf("agent %s cannot start a turn: %w", a.ID(), err))
		outcome = outcomeNone
		return res
	}
	if _, err := appendOwed(a.Log, c.noticesFor(a, from, schema.StateBusy, transitionKey(t.RunID, t.Turn)), eventlog.Record{Event: schema.TurnStart,
		Data: schema.TurnStartData{RunID: t.RunID, Turn: t.Turn, BootID: c.bootID, Prompt: req.Prompt, Provider: t.Provider,
			Model: t.Model, MessageIDs: nonNil(req.MessageIDs)}}); err != nil {
		// A cluster's log may have stored it all the same (an answer
		// lost in an election): then the run it opened is ended when
		// the log heals (an unconfirmed end is written only for a run
		// the healed log holds open).
		if errors.Is(err, store.ErrUnknownOutcome) {
			a.OweUnconfirmed(t.RunID, schema.TurnFailed, schema.TurnFailedData{RunID: t.RunID, Turn: t.Turn, Error: "turn.start could not be confirmed: " + err.Error()}, err)
			c.flushIfHealed(a)
		}
		res.Err = logFailure(fmt.Errorf("logging turn.start for agent %s: %w", a.ID(), err))
		outcome = outcomeNone
		return res
	}
	c.saveSession(a, func(s *session.Session) {
		s.State = session.StateRunning
		s.Provider, s.Model = t.Provider, t.Model
		s.Run = &session.Run{RunID: t.RunID, BootID: c.bootID, StartedAt: c.now().UTC()}
	})
	c.notify(a)

	// The workspace's state before the provider changes it (a re-run's
	// start is the run's: restored before its run.resumed).
	if a.RunStartCommit(t.RunID) == "" {
		if err := c.snapshotTurn(ctx, a, t.RunID, t.Turn, schema.SnapshotStart, handed{}); err != nil {
			outcome = c.endTurn(ctx, a, t, "", 0, provider.Usage{}, err, &res)
			return res
		}
	}
	var usage provider.Usage
	response, attempts, err := c.attempts(ctx, a, req, t, &usage, &t.handed)
	outcome = c.endTurn(ctx, a, t, response, attempts, usage, err, &res)
	return res
}

// endTurn logs how the turn's attempts ended (turn.complete, the wait
// that suspended the run, turn.cancelled or turn.failed), fills in res and
// returns the outcome finishTurn acts on (none when the end could not be
// logged: it is owed).
func (c *Core) endTurn(ctx context.Context, a *agent, t turnPlan, response string, attempts int,
	usage provider.Usage, err error, res *TurnResult) turnOutcome {
	runID, turn := t.RunID, t.Turn
	if !errors.Is(err, provider.ErrRunSuspended) && !(c.stopping() && !errors.Is(context.Cause(ctx), errOperatorCancel) && ctx.Err() != nil) {
		// The workspace's state at the turn's end, before the end is
		// logged; a failure to record it is logged and ends nothing.
		if serr := c.snapshotTurn(context.WithoutCancel(ctx), a, runID, turn, schema.SnapshotEnd, t.handed); serr != nil {
			c.log.Error("recording a workspace at a turn's end", "agent", a.ID(), "run", runID, "err", serr)
		}
	}
	// The notices of busy -> idle go in the end's write.
	var ended eventlog.Entry
	idle := func(event string, data any) error {
		var err error
		ended, err = appendOwed(a.Log, c.noticesFor(a, schema.StateBusy, schema.StateIdle, transitionKey(runID, turn)), eventlog.Record{Event: event, Data: data})
		return err
	}
	switch {
	case err == nil:
		done := schema.TurnCompleteData{RunID: runID, Turn: turn, Response: response}
		if !usage.IsZero() {
			done.Usage = &usage
		}
		if lerr := idle(schema.TurnComplete, done); lerr != nil {
			// Not durable, so not complete: the run ends as failed once the
			// log takes it.
			a.Owe(runID, schema.TurnFailed, schema.TurnFailedData{RunID: runID, Turn: turn, Attempts: attempts,
				Error: "the turn's result could not be logged: " + lerr.Error()}, lerr)
			c.flushIfHealed(a)
			res.Err = logFailure(fmt.Errorf("logging turn.complete for agent %s: %w", a.ID(), lerr))
			return outcomeNone
		}
		res.Response, res.ResponseSeq, res.Status = response, ended.Seq, session.StatusIdle
		return outcomeComplete
	case errors.Is(err, provider.ErrRunSuspended):
		res.Status = session.StatusSuspended
		res.Wait, res.Token = a.Suspended(runID)
		return outcomeSuspended
	case (ctx.Err() != nil || errors.Is(err, context.Canceled)) && c.stopping() && !errors.Is(context.Cause(ctx), errOperatorCancel):
		// A stop interrupts the run, never cancels it (SPEC 9): the next
		// start re-runs it under the resume policy.
		if _, lerr := a.Append(schema.RunInterrupted, schema.RunInterruptedData{RunID: runID, Reason: schema.ReasonShutdown}); lerr != nil {
			c.log.Error("logging run.interrupted at shutdown; the next start marks the run interrupted", "agent", a.ID(), "err", lerr)
		}
		res.Status = session.StatusInterruptedStartup
		res.Err = failf(ErrShuttingDown, "the daemon is stopping: run %s of agent %s was interrupted; the next start re-runs it "+
			"(resume policy auto) or lists it for `warren agent resume`", runID, a.Name())
		return outcomeNone
	case ctx.Err() != nil || errors.Is(err, context.Canceled):
		outcome := outcomeCancelled
		if lerr := idle(schema.TurnCancelled, schema.TurnCancelledData{RunID: runID, Turn: turn}); lerr != nil {
			c.log.Error("logging turn.cancelled", "agent", a.ID(), "err", lerr)
			a.Owe(runID, schema.TurnCancelled, schema.TurnCancelledData{RunID: runID, Turn: turn}, lerr)
			c.flushIfHealed(a)
			outcome = outcomeNone
		}
		res.Status = session.StatusIdle
		res.Err = failf(ErrWrongState, "turn cancelled")
		return outcome
	default:
		outcome := outcomeFailed
		failed := schema.TurnFailedData{RunID: runID, Turn: turn, Error: err.Error(), Attempts: attempts}
		if lerr := idle(schema.TurnFailed, failed); lerr != nil {
			c.log.Error("logging turn.failed", "agent", a.ID(), "err", lerr)
			a.Owe(runID, schema.TurnFailed, failed, lerr)
			c.flushIfHealed(a)
			outcome = outcomeNone
		}
		res.Status = session.StatusIdle
		res.Err = err
		return outcome
	}
}

// finishTurn is a turn's aftermath: session.json, subscriptions, deferred
// work (spawns, completion), and the next wake.
func (c *Core) finishTurn(a *agent, outcome turnOutcome) {
	state := session.StateIdle
	if outcome == outcomeSuspended {
		state = session.StateSuspended
	}
	wait := a.LiveWait()
	if outcome != outcomeNone {
		c.saveSession(a, func(s *session.Session) {
			s.State = state
			if state == session.StateSuspended && s.Run != nil {
				s.Run.Wait = wait
			} else if state == session.StateIdle {
				s.Run = nil
			}
		})
	}
	deferred, completing := a.Rest(outcome == outcomeFailed)
	// At rest now: the turn's last entries were logged while it was busy.
	c.ckpts.Soon(a)
	if outcome != outcomeNone {
		c.notify(a) // busy -> to, owed by the end's write (run.waiting's for a wait)
	}
	for _, f := range deferred {
		f()
	}
	defer c.changed.Fire()
	// Before the change signal: a waiter woken by it sees the aftermath
	// done.
	defer a.Settled()
	if completing {
		if err := c.terminate(c.ctx, a); err != nil {
			c.log.Error("terminating a completed agent", "agent", a.ID(), "err", err)
		}
		return
	}
	if outcome == outcomeFailed {
		c.childFailed(a)
	}
	c.wake(a)
}

// turnOutcome is how a turn's attempts ended, as the aftermath acts on it.
type turnOutcome string

// The outcomes.
const (
	// outcomeNone: no turn started, or its end could not be logged (it is
	// owed): nothing for session.json or the subscribers.
	outcomeNone      turnOutcome = ""
	outcomeComplete  turnOutcome = "complete"
	outcomeFailed    turnOutcome = "failed"
	outcomeCancelled turnOutcome = "cancelled"
	outcomeSuspended turnOutcome = "suspended"
)

// turnPlan is the turn StartTurn started.
type turnPlan struct {
	RunID           string
	Turn            int
	Provider, Model string
	// Rerun: the turn re-runs an earlier run (a resume).
	Rerun bool
	// handed is the end snapshot the attempt that answered took on a
	// worker, brought home (workspaces_away.go).
	handed handed
}

// chooseTurn picks a turn's provider and model (the request's, else the
// agent's, provider and model; the agent's model only with its own
// provider; else the provider's default) and its run (the request's,
// else a new one after the agent's last turn, turnNo).
func chooseTurn(req TurnRequest, agentProvider, agentModel string, turnNo int, defaultModel func(provider string) string,
	newID func() string) turnPlan {
	provName, model := req.Provider, req.Model
	if provName == "" {
		provName = agentProvider
	}
	if model == "" && provName == agentProvider {
		model = agentModel
	}
	if model == "" {
		model = defaultModel(provName)
	}
	runID, turn := req.RunID, req.Turn
	if runID == "" {
		runID, turn = newID(), turnNo+1
	}
	return turnPlan{RunID: runID, Turn: turn, Provider: provName, Model: model, Rerun: req.RunID != ""}
}

// logFailure is a failed log write as the caller sees it: a log that
// refuses appends until it heals is ErrUnavailable.
func logFailure(err error) error {
	if errors.Is(err, eventlog.ErrPoisoned) {
		return failf(ErrUnavailable, "%w", err)
	}
	return err
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
