package engine

import (
	"context"
	"github.com/warren-dev/warren/engine/internal/mail"
	"github.com/warren-dev/warren/engine/internal/retry"
	"github.com/warren-dev/warren/engine/internal/turnrun"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/registry"
	"github.com/warren-dev/warren/session"
)

// A turn's steps, its outcomes and what each logs and returns are package
// turnrun's; the Core claims the agent, starts the turn on a goroutine of
// its own and carries out each step through turnAgent (below).

// The turn's request, result and retry notice (package turnrun).
type (
	// TurnRequest starts (or re-runs) a turn.
	TurnRequest = turnrun.Request
	// TurnResult is how a turn ended.
	TurnResult = turnrun.Result
	// RetryNotice describes one scheduled retry of a turn
	// (TurnRequest.OnRetry).
	RetryNotice = turnrun.RetryNotice
)

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

// runTurn runs one turn of a claimed agent to its end (package turnrun).
func (c *Core) runTurn(a *agent, req TurnRequest) TurnResult {
	r := turnrun.Runner{BootID: c.bootID, Now: c.now, Log: c.log}
	return r.Run(c.ctx, &turnAgent{agent: a, c: c}, req)
}

// turnAgent is an agent as package turnrun runs a turn on it: its record,
// and the steps that need the Core (none under the record's lock, nor
// across a log append or a call back into turnrun).
type turnAgent struct {
	*agent
	c  *Core
	at *runningTurn // the turn Begin started
}

var _ turnrun.Agent = (*turnAgent)(nil)

func (t *turnAgent) SaveSession(f func(*session.Session)) { t.c.saveSession(t.agent, f) }
func (t *turnAgent) Notify()                              { t.c.notify(t.agent) }
func (t *turnAgent) Notices(from, to, key string) []eventlog.Record {
	return t.c.noticesFor(t.agent, from, to, key)
}

func (t *turnAgent) Begin(req TurnRequest, cancel context.CancelFunc) (tr turnrun.Turn, released error) {
	// The config is read once, before StartTurn takes the record's lock.
	cfg := t.c.config()
	defaultModel := func(name string) string { return registry.DefaultModel(cfg, name) }
	tr, t.at, released = t.StartTurn(req, cancel, defaultModel, newID)
	return tr, released
}

func (t *turnAgent) Ended() { t.at.End() }

func (t *turnAgent) Provider(name string) error {
	_, err := t.c.provider(name)
	return err
}

func (t *turnAgent) FlushOwed() error { return t.c.flushOwed(t.agent) }

func (t *turnAgent) Acquire(ctx context.Context, provName, model string) (turnrun.Session, error) {
	return t.c.sessions.Acquire(ctx, t.agent, provName, model)
}

func (t *turnAgent) Policy() retry.Policy {
	cfg := t.c.config()
	return retry.Policy{MaxRetries: cfg.MaxRetries, Base: cfg.RetryBaseDelay, Timeout: cfg.TurnTimeout,
		Jitter: t.c.opts.Jitter, Sleep: t.c.opts.Sleep}
}

func (t *turnAgent) Delta(runID, text string) { t.c.bus.PublishDelta(t.ID(), runID, text) }

func (t *turnAgent) Tools(runID string, turn int) turnrun.Tools {
	return t.Attempt(runID, t.c.newRunTools(t.agent, runID, turn))
}

func (t *turnAgent) Checkpoint()      { t.c.ckpts.Soon(t.agent) }
func (t *turnAgent) Changed()         { t.c.changed.Fire() }
func (t *turnAgent) Terminate() error { return t.c.life().End(lifeAgent{t.agent, t.c}) }
func (t *turnAgent) NotifyFailure()   { mail.ChildFailed[*agent](t.c.mail(), t.agent) }
func (t *turnAgent) Wake()            { t.c.wake(t.agent) }
