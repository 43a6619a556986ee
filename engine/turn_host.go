package engine

import (
	"context"

	"github.com/warren-dev/warren/engine/internal/mail"
	"github.com/warren-dev/warren/engine/internal/retry"
	"github.com/warren-dev/warren/engine/internal/turnrun"
	"github.com/warren-dev/warren/engine/internal/views"
	"github.com/warren-dev/warren/history"
	"github.com/warren-dev/warren/multiplexer"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/session"
)

// turnAgent is an agent as package turnrun runs a turn on it: each method
// is one step, under the locks the Core took for it (a.mu and c.mu never
// together, neither across a log append or a call back into turnrun).
type turnAgent struct {
	c  *Core
	a  *agent
	at *activeTurn // the turn Begin started
}

var _ turnrun.Agent = (*turnAgent)(nil)

func (t *turnAgent) ID() string { return t.a.id }

func (t *turnAgent) Append(event string, data any) error {
	_, err := t.a.log.Append(event, data)
	return err
}

func (t *turnAgent) SaveSession(f func(*session.Session)) { t.c.saveSession(t.a, f) }
func (t *turnAgent) Transition(from, to string)           { t.c.fireTransition(t.a, from, to) }

func (t *turnAgent) Begin(req TurnRequest, cancel context.CancelFunc) (turnrun.Turn, error) {
	a := t.a
	a.mu.Lock()
	defer a.mu.Unlock()
	tr := turnrun.Choose(req, turnrun.Settings{Provider: a.p.Provider, Model: a.p.Model, TurnNo: a.p.TurnNo},
		t.c.providers.DefaultModel, newID)
	t.at = &activeTurn{runID: tr.RunID, rerun: tr.Rerun, cancel: cancel, done: make(chan struct{})}
	a.cur = t.at
	return tr, a.released
}

func (t *turnAgent) Ended() { close(t.at.done) }

func (t *turnAgent) Provider(name string) error {
	_, err := t.c.provider(name)
	return err
}

func (t *turnAgent) FlushOwed() error { return t.c.flushOwed(t.a) }

func (t *turnAgent) Acquire(ctx context.Context, provName, model string) (turnrun.Session, error) {
	lease, err := t.c.acquireSession(ctx, t.a, provName, model)
	if err != nil {
		return nil, err
	}
	return turnSession{lease}, nil
}

func (t *turnAgent) Policy() retry.Policy {
	cfg := t.c.config()
	return retry.Policy{MaxRetries: cfg.MaxRetries, Base: cfg.RetryBaseDelay, Timeout: cfg.TurnTimeout,
		Jitter: t.c.opts.Jitter, Sleep: t.c.opts.Sleep}
}

func (t *turnAgent) Delta(runID, text string) { t.c.bus.PublishDelta(t.a.id, runID, text) }

func (t *turnAgent) Tools(runID string, turn int) turnrun.Tools {
	return attemptTools{a: t.a, runID: runID, t: t.c.newRunTools(t.a, runID, turn)}
}

func (t *turnAgent) Owe(runID, event string, data any, cause error) {
	t.a.owe(runID, event, data, cause)
}

func (t *turnAgent) Suspended(runID string) (wait *WaitInfo, token string) {
	a := t.a
	a.mu.Lock()
	defer a.mu.Unlock()
	if r := a.p.RunFor(runID); r != nil && r.Wait != nil {
		wait = views.WaitOf(r.Wait, runID)
	}
	return wait, a.resumes.Take(runID)
}

func (t *turnAgent) LiveWait() *session.Wait {
	a := t.a
	a.mu.Lock()
	defer a.mu.Unlock()
	if r := a.p.Run; r != nil && r.Wait != nil && r.Wait.TokenState == tokLive {
		return &session.Wait{Kind: r.Wait.Kind, Prompt: r.Wait.Prompt, TokenID: r.Wait.TokenID,
			SecretHash: r.Wait.SecretHash, Deadline: r.Wait.Deadline}
	}
	return nil
}

func (t *turnAgent) Rest(held bool) (deferred []func(), completing bool) {
	a := t.a
	a.mu.Lock()
	defer a.mu.Unlock()
	a.cur = nil
	a.busy = false
	a.settling = true
	a.held = held
	deferred = a.deferred
	a.deferred = nil
	return deferred, a.completing
}

func (t *turnAgent) Checkpoint() { t.c.checkpointSoon(t.a) }

func (t *turnAgent) Settled() {
	t.a.mu.Lock()
	t.a.settling = false
	t.a.mu.Unlock()
}

func (t *turnAgent) Changed()         { t.c.changed.Fire() }
func (t *turnAgent) Terminate() error { return t.c.life().End(lifeAgent{t.c, t.a}) }
func (t *turnAgent) NotifyFailure()   { mail.ChildFailed[*agent](t.c.mail(), t.a) }
func (t *turnAgent) Wake()            { t.c.wake(t.a) }

// turnSession is the agent's provider session held in its multiplexer
// slot for a turn.
type turnSession struct{ lease *multiplexer.Lease[*live] }

func (s turnSession) Inject() *history.History { return s.lease.Value().inject }
func (s turnSession) Injected()                { s.lease.Value().inject = nil }

func (s turnSession) Send(ctx context.Context, prompt string, io provider.TurnIO) (string, error) {
	return s.lease.Value().sess.Send(ctx, prompt, io)
}

func (s turnSession) End(discard bool) {
	if !discard {
		s.lease.Release()
		return
	}
	lv := s.lease.Value()
	s.lease.Discard()
	_ = lv.sess.Stop()
}

// attemptTools are one attempt's tools: the calls the provider makes and,
// through the attempt's door, those made with the agent's credential
// (agentauth.go).
type attemptTools struct {
	a     *agent
	runID string
	t     *runTools
}

func (x attemptTools) Caller() provider.ToolCaller { return x.t }

func (x attemptTools) Open(ctx context.Context, suspend context.CancelCauseFunc) {
	x.t.door.Open(ctx, suspend)
	x.a.setTurnTools(x.runID, x.t)
}

func (x attemptTools) Close() error {
	x.a.setTurnTools(x.runID, nil)
	return x.t.door.Close()
}

func (x attemptTools) Drain() error { return x.t.Drain() }
