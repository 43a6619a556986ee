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

// Restore strategies logged in session.restored.
const (
	strategyNative  = "native"
	strategyHistory = "history"
	strategyFresh   = "fresh"
)

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
	a.mu.Lock()
	s := a.sess.Clone()
	s.ProviderState = blob
	s.Provider, s.Model = lv.provider, lv.model
	s.UpdatedAt = c.now().UTC()
	a.sess = s
	a.mu.Unlock()
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
	o := &sessionOpen{c: c, a: a, prov: prov, caps: prov.Capabilities(), provName: provName, model: model}
	a.mu.Lock()
	sess := a.sess
	o.handle = a.p.Handle
	sessProv, sessModel := a.p.SessProvider, a.p.SessModel
	instructions, cwd := a.p.Instructions, a.p.Cwd
	a.mu.Unlock()
	o.same = sessProv == provName && sessModel == model
	if sess != nil && o.same && sess.Provider == provName && sess.Model == model {
		o.blob = sess.ProviderState
	}
	o.spec = c.providerSpec(provName, a.id, model, instructions, cwd, nil)
	if lv, done, err := o.restore(ctx); done {
		return lv, err
	}
	return o.fresh(ctx)
}

// sessionOpen is one openSession: what it read of the agent, and the
// history, read from the log only when a step needs it (not for a restore
// from an eviction blob or a native handle).
type sessionOpen struct {
	c           *Core
	a           *agent
	prov        provider.Provider
	caps        provider.Capabilities
	provName    string
	model       string
	handle      string
	same        bool // the recorded session is of this provider and model
	blob        []byte
	spec        provider.Spec
	h           history.History
	haveHistory bool
}

// loadHistory reads the agent's history once.
func (o *sessionOpen) loadHistory() error {
	if o.haveHistory {
		return nil
	}
	h, err := o.c.history(o.a)
	if err != nil {
		return err
	}
	o.h, o.haveHistory = h, true
	// The turn being started is not history, unless it re-runs an
	// interrupted or resumed run (then its earlier calls show as
	// interrupted in the block).
	o.a.mu.Lock()
	if cur := o.a.cur; cur != nil && !cur.rerun && o.h.Open != nil && o.h.Open.RunID == cur.runID {
		o.h.Open = nil
	}
	o.a.mu.Unlock()
	return nil
}

// restore tries the eviction blob or the native handle. done is false when
// there is neither, or when the restore failed in a way a fresh session
// with the history answers.
func (o *sessionOpen) restore(ctx context.Context) (lv *live, done bool, err error) {
	useBlob := len(o.blob) > 0
	useHandle := o.same && o.handle != "" && (o.caps.NativeResume || o.caps.StructuredHistory)
	if !useBlob && !useHandle {
		return nil, false, nil
	}
	strategy := strategyNative
	if (useBlob && o.caps.HistoryOnRestore) || (!useBlob && o.caps.StructuredHistory) {
		// HistoryOnRestore: the blob is a handle, the conversation comes
		// from the log.
		if err := o.loadHistory(); err != nil {
			return nil, true, err
		}
		o.spec.History = o.h.Turns
		if !useBlob && !o.caps.NativeResume {
			strategy = strategyHistory
		}
	}
	s, err := o.prov.Restore(ctx, o.spec, o.blob, o.handle)
	if err == nil {
		method := ""
		if rb, ok := s.(provider.RestoredBy); ok {
			method = rb.RestoredBy()
		}
		if err := o.c.logRestored(o.a, o.provName, o.model, strategy, method); err != nil {
			_ = s.Stop()
			return nil, true, err
		}
		if useBlob {
			// The blob is consumed: once the session takes more turns it
			// is stale, and a restart must not restore from it (the
			// handle and the log are current).
			o.c.saveSession(o.a, func(s2 *session.Session) { s2.ProviderState = nil })
		}
		return &live{sess: s, provider: o.provName, model: o.model}, true, nil
	}
	if ctx.Err() != nil {
		return nil, true, err
	}
	if transient, _ := provider.IsTransient(err); transient && o.caps.NativeResume {
		// A dead transport (the agent died or hung while restoring)
		// says nothing about the session: a fresh one would lose it
		// for good. The turn fails (transient) and the next one tries
		// the handle again.
		return nil, true, err
	}
	o.c.log.Warn("native restore failed; starting a fresh session with the history", "agent", o.a.id, "provider", o.provName, "err", err)
	return nil, false, nil
}

// fresh creates a new session, with the history given as structured turns
// or injected into the first prompt, and logs it.
func (o *sessionOpen) fresh(ctx context.Context) (*live, error) {
	if err := o.loadHistory(); err != nil {
		return nil, err
	}
	if o.caps.StructuredHistory {
		o.spec.History = o.h.Turns
	}
	s, err := o.prov.Create(ctx, o.spec)
	if err != nil {
		return nil, err
	}
	lv := &live{sess: s, provider: o.provName, model: o.model}
	strategy := strategyFresh
	if len(o.h.Turns) > 0 || o.h.Open != nil {
		strategy = strategyHistory
		if !o.caps.StructuredHistory {
			h := o.h
			lv.inject = &h
		}
	}
	recs := []eventlog.Record{
		{Event: schema.SessionCreated, Data: schema.SessionCreatedData{Provider: o.provName, Model: o.model, Handle: s.Handle()}},
		{Event: schema.SessionRestored, Data: schema.SessionRestoredData{Provider: o.provName, Model: o.model, Strategy: strategy}},
	}
	if _, err := o.a.log.AppendBatch(recs); err != nil {
		_ = s.Stop()
		return nil, fmt.Errorf("logging the new session of agent %s: %w", o.a.id, err)
	}
	o.c.saveSession(o.a, func(s2 *session.Session) {
		s2.Provider, s2.Model, s2.Handle, s2.ProviderState = o.provName, o.model, s.Handle(), nil
	})
	return lv, nil
}

func (c *Core) logRestored(a *agent, provName, model, strategy, method string) error {
	if _, err := a.log.Append(schema.SessionRestored, schema.SessionRestoredData{Provider: provName, Model: model, Strategy: strategy, Method: method}); err != nil {
		return fmt.Errorf("logging the restore of agent %s: %w", a.id, err)
	}
	return nil
}

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
// it written in the background. The log is the authority, so the snapshot
// is written off the acknowledgement path: a per-agent writer waits
// SessionSaveDelay after a change (no wait once the core stops), then
// writes the latest state, and repeats while changes came during the wait
// or the write. A busy agent's snapshot is written about once per delay
// rather than twice per turn. A failed save is logged: the log can rebuild
// session.json.
func (c *Core) saveSession(a *agent, f func(s *session.Session)) {
	a.mu.Lock()
	var s *session.Session
	if a.sess != nil {
		s = a.sess.Clone() // deep: the writer may be encoding the old one
	} else {
		s = &session.Session{ID: a.id, CreatedAt: c.now().UTC()}
	}
	f(s)
	s.UpdatedAt = c.now().UTC()
	a.sess = s
	if a.saving {
		a.saveDirty = true
		a.mu.Unlock()
		return
	}
	a.saving = true
	a.mu.Unlock()
	c.saves.Add(1)
	go func() {
		defer c.saves.Done()
		for {
			c.saveDelay()
			// The write below copies the latest state, so the changes made
			// while waiting need no second one.
			a.mu.Lock()
			a.saveDirty = false
			a.mu.Unlock()
			if err := c.flushSession(a); err != nil {
				c.log.Error("saving session.json", "agent", a.id, "err", err)
			}
			if every := c.opts.CheckpointEvery; every > 0 {
				c.writeCheckpoint(a, c.checkpointMin(a, every))
			}
			a.mu.Lock()
			if !a.saveDirty {
				a.saving = false
				a.mu.Unlock()
				return
			}
			a.mu.Unlock()
		}
	}()
}

// saveDelay waits SessionSaveDelay on the core's clock, or until the core
// stops. (The writers are not scheduler work: Close stops the scheduler
// before it cancels the turns whose ends save snapshots, and waits for the
// writers, through c.saves, after it has cut their delay short.)
func (c *Core) saveDelay() {
	if d := c.opts.SessionSaveDelay; d > 0 {
		_ = schedule.Sleep(c.ctx, c.opts.Clock, d)
	}
}

// flushSession writes the agent's latest snapshot now. Writes are
// serialised per agent and copy the snapshot under the lock, so an older
// snapshot never lands after a newer one.
func (c *Core) flushSession(a *agent) error {
	a.saveMu.Lock()
	defer a.saveMu.Unlock()
	a.mu.Lock()
	cp := a.sess.Clone()
	a.mu.Unlock()
	return c.store.Save(cp)
}
