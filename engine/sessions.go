package engine

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/history"
	"github.com/warren-dev/warren/multiplexer"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/reopen"
	"github.com/warren-dev/warren/schedule"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/session"
)

// live is a provider session held in a multiplexer slot.
type live struct {
	sess     provider.Session
	provider string
	model    string
	// inject is the history block the first prompt of this provider
	// session must carry (providers without structured history), once.
	inject *history.History
}

func wrapSlotErr(err error) error {
	if errors.Is(err, multiplexer.ErrNoSlot) {
		return failf(ErrNoSlot, "no provider slot became free in time: %w", err)
	}
	return err
}

// evict is the multiplexer's eviction: suspend the provider session, save
// its blob in session.json, log suspend.result, stop it.
func (c *Core) evict(ctx context.Context, id string, lv *live) error {
	defer func() { _ = lv.sess.Stop() }()
	blob, err := lv.sess.Suspend(ctx)
	if err != nil {
		return fmt.Errorf("suspending the session of agent %s: %w", id, err)
	}
	a, ok := c.agent(id)
	if !ok {
		return nil
	}
	a.snap.Change(a.id, c.now, func(s *session.Session) {
		s.ProviderState = blob
		s.Provider, s.Model = lv.provider, lv.model
	})
	// The blob must be on disk before the provider session stops. The
	// snapshot and suspend.result are written at the same time: recovery
	// restores a blob only when suspend.result is the last session event,
	// and without one it falls back to the handle or the history.
	logged := make(chan error, 1)
	go func() {
		_, err := a.log.Append(schema.SuspendResult, schema.SuspendResultData{StateSize: len(blob)})
		logged <- err
	}()
	ferr := c.flushSession(a)
	lerr := <-logged
	if ferr != nil {
		return fmt.Errorf("saving the evicted session of agent %s: %w", id, ferr)
	}
	if lerr != nil {
		return fmt.Errorf("logging the eviction of agent %s: %w", id, lerr)
	}
	return nil
}

// acquireSession gets the agent's provider session for a turn on the given
// provider and model, restoring or creating it as needed.
func (c *Core) acquireSession(ctx context.Context, a *agent, provName, model string) (*multiplexer.Lease[*live], error) {
	for attempt := 0; attempt < 2; attempt++ {
		lease, err := c.mux.Acquire(ctx, a.id, provName, func(ctx context.Context) (*live, error) {
			return c.openSession(ctx, a, provName, model)
		})
		if err != nil {
			return nil, wrapSlotErr(err)
		}
		lv := lease.Value()
		if lv.provider == provName && lv.model == model {
			return lease, nil
		}
		// A live session of another provider or model: replace it.
		lease.Discard()
		_ = lv.sess.Stop()
	}
	return nil, fmt.Errorf("could not switch agent %s to %s/%s", a.id, provName, model)
}

// openSession brings back (or creates) the provider session of an agent that
// is not live: from the eviction blob, from the native handle recorded at
// creation, or fresh with the history rebuilt from the log.
func (c *Core) openSession(ctx context.Context, a *agent, provName, model string) (*live, error) {
	prov, err := c.provider(provName)
	if err != nil {
		return nil, err
	}
	req := reopen.Request{AgentID: a.id, Provider: prov, ProvName: provName, Model: model, Logger: c.log}
	sess := a.snap.Get()
	a.mu.Lock()
	req.Handle = a.p.Handle
	sessProv, sessModel := a.p.SessProvider, a.p.SessModel
	instructions, cwd := a.p.Instructions, a.p.Cwd
	a.mu.Unlock()
	req.Same = sessProv == provName && sessModel == model
	if sess != nil && req.Same && sess.Provider == provName && sess.Model == model {
		req.Blob = sess.ProviderState
	}
	req.Spec = c.providerSpec(provName, a.id, model, instructions, cwd, nil)
	s, inject, err := reopen.Open(ctx, req, sessionAgent{c: c, a: a})
	if err != nil {
		return nil, err
	}
	return &live{sess: s, provider: provName, model: model, inject: inject}, nil
}

// sessionAgent is what reopen needs of an agent: its log, its history and
// its session.json snapshot.
type sessionAgent struct {
	c *Core
	a *agent
}

func (g sessionAgent) Append(event string, data any) (eventlog.Entry, error) {
	return g.a.log.Append(event, data)
}

func (g sessionAgent) AppendBatch(recs []eventlog.Record) ([]eventlog.Entry, error) {
	return g.a.log.AppendBatch(recs)
}

// History is the agent's history from its log. The turn being started is
// not history, unless it re-runs an interrupted or resumed run (then its
// earlier calls show as interrupted in the block).
func (g sessionAgent) History() (history.History, error) {
	h, err := g.c.history(g.a)
	if err != nil {
		return h, err
	}
	g.a.mu.Lock()
	if cur := g.a.cur; cur != nil && !cur.rerun && h.Open != nil && h.Open.RunID == cur.runID {
		h.Open = nil
	}
	g.a.mu.Unlock()
	return h, nil
}

func (g sessionAgent) SaveSnapshot(f func(*session.Session)) { g.c.saveSession(g.a, f) }

// history rebuilds the agent's completed turns from its log, streaming it:
// only the entries of turns are kept (never the messages, whose payloads
// may be most of the log).
func (c *Core) history(a *agent) (history.History, error) {
	r, err := c.st.Read(context.Background(), a.id, 0, 0)
	if err != nil {
		return history.History{}, fmt.Errorf("reading the log of agent %s for its history: %w", a.id, err)
	}
	defer r.Close()
	var hs []history.Entry
	for {
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return history.History{}, fmt.Errorf("reading the log of agent %s for its history: %w", a.id, err)
		}
		switch e.Event {
		case schema.TurnStart, schema.TurnComplete, schema.TurnFailed, schema.TurnCancelled, schema.ToolCall, schema.RunInterrupted, schema.RunWaiting, schema.RunResumed, schema.ContextReset:
			hs = append(hs, history.Entry{Seq: e.Seq, Event: e.Event, Data: e.Data})
		}
	}
	return history.Build(hs)
}

// saveSession updates the agent's session.json snapshot through f and has
// it written in the background (package snapsave). (Checkpoints follow the
// log's growth, not these saves: checkpointSoon.)
func (c *Core) saveSession(a *agent, f func(s *session.Session)) {
	c.snaps.Update(&a.snap, a.id, f, nil)
}

// saveDelay waits SessionSaveDelay on the core's clock, or until the core
// stops. (The writers are not scheduler work: Close stops the scheduler
// before it cancels the turns whose ends save snapshots, and waits for the
// writers, through c.snaps.Wait, after it has cut their delay short.)
func (c *Core) saveDelay() {
	if d := c.opts.SessionSaveDelay; d > 0 {
		_ = schedule.Sleep(c.ctx, c.opts.Clock, d)
	}
}

// flushSession writes the agent's latest snapshot now. Writes are
// serialised per agent and copy the latest snapshot, so an older one never
// lands after a newer one.
func (c *Core) flushSession(a *agent) error { return c.snaps.Flush(&a.snap) }
