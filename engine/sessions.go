package engine

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/warren-dev/warren/agentspec"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/history"
	"github.com/warren-dev/warren/multiplexer"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/schedule"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/session"
)

// The agents' live provider sessions. While an agent's
// provider session is live it sits in a slot of the multiplexer (package
// multiplexer), one per agent, in the pool of its provider:
//
//   - a new agent creates it (Create) and keeps it in the slot once its
//     creation is durable, or abandons it;
//   - a turn acquires it (Acquire) for the turn's provider and model: a
//     live session of another provider or model is stopped and replaced;
//     a session that is not live is brought back (reopenSession) from
//     the blob its eviction saved in session.json, from the native handle
//     recorded at creation, or fresh with the history rebuilt from the
//     log (without the turn being started, unless it re-runs a run);
//   - the multiplexer evicts it when a slot is needed or on request
//     (Evict, EvictAll at close): the session is suspended, its blob
//     saved in session.json and suspend.result logged, both durable
//     before the provider session stops;
//   - termination stops it (Stop).
//
// A slot that stayed held past the wait is code 6 (ErrNoSlot).
//
// # Locks
//
// None of its own. The multiplexer's lock and the snapshot's  are leaves; an eviction appends to the agent's log and writes
// its snapshot holding neither; the record's methods
// take its lock for each read.

// liveSession is a provider session held in a multiplexer slot.
type liveSession struct {
	Sess     provider.Session
	Provider string
	Model    string
	// Inject is the history block the first prompt of this provider
	// session must carry (providers without structured history), once.
	Inject *history.History
}

// liveSessions are the live provider sessions of one engine's agents.
type liveSessions struct {
	c   *Core
	mux *multiplexer.Mux[*liveSession]
}

// newLiveSessions makes the sessions, their slots in pools as cfg says.
func newLiveSessions(c *Core, cfg multiplexer.Config) *liveSessions {
	s := &liveSessions{c: c}
	s.mux = multiplexer.New[*liveSession](cfg, s.evict, c.log.Named("mux"))
	return s
}

// SetConfig applies pool settings live; Stats reports the pools by name.
func (s *liveSessions) SetConfig(cfg multiplexer.Config)        { s.mux.SetConfig(cfg) }
func (s *liveSessions) Stats() map[string]multiplexer.PoolStats { return s.mux.Stats() }

// Evict forces the eviction of agent id's live session; it is an error
// when the session is not live or is held by a turn. EvictAll evicts
// every live session (the engine's close).
func (s *liveSessions) Evict(ctx context.Context, id string) error { return s.mux.Evict(ctx, id) }
func (s *liveSessions) EvictAll(ctx context.Context) error         { return s.mux.EvictAll(ctx) }

// Stop stops agent id's live session, if any, without saving it.
func (s *liveSessions) Stop(id string) {
	if lv, ok := s.mux.Remove(id); ok {
		_ = lv.Sess.Stop()
	}
}

func wrapSlotErr(err error) error {
	if errors.Is(err, multiplexer.ErrNoSlot) {
		return failf(ErrNoSlot, "no provider slot became free in time: %w", err)
	}
	return err
}

// Create creates the provider session of a new agent id (not listed yet:
// its spec is all there is of it), held in its slot until Keep or
// Abandon.
func (s *liveSessions) Create(ctx context.Context, prov provider.Provider, id string, spec CreateSpec) (newSession, error) {
	lease, err := s.mux.Acquire(ctx, id, spec.Provider, func(ctx context.Context) (*liveSession, error) {
		ps := s.c.providerSpec(spec.Provider, id, spec.Model, spec.Instructions, spec.Cwd, spec.sandbox, spec.made)
		if v, ok := spec.Metadata[agentspec.HistoryModeKey]; ok {
			ps.HistoryMode = v // the agent is not listed yet: its metadata is here
		}
		ns, err := prov.Create(ctx, ps)
		if err != nil {
			return nil, err
		}
		return &liveSession{Sess: ns, Provider: spec.Provider, Model: spec.Model}, nil
	})
	if err != nil {
		return newSession{}, wrapSlotErr(fmt.Errorf("creating the %s session: %w", spec.Provider, err))
	}
	return newSession{lease}, nil
}

// newSession is a new agent's provider session under its lease.
type newSession struct {
	lease *multiplexer.Lease[*liveSession]
}

func (n newSession) Handle() string { return n.lease.Value().Sess.Handle() }
func (n newSession) Keep()          { n.lease.Release() }
func (n newSession) Abandon() {
	n.lease.Discard()
	_ = n.lease.Value().Sess.Stop()
}

// Acquire gets a's provider session for a turn on the given provider and
// model, restoring or creating it as needed.
func (s *liveSessions) Acquire(ctx context.Context, a *agent, provName, model string) (turnSession, error) {
	for attempt := 0; attempt < 2; attempt++ {
		lease, err := s.mux.Acquire(ctx, a.ID(), provName, func(ctx context.Context) (*liveSession, error) {
			return s.open(ctx, a, provName, model)
		})
		if err != nil {
			return turnSession{}, wrapSlotErr(err)
		}
		lv := lease.Value()
		if lv.Provider == provName && lv.Model == model {
			return turnSession{lease}, nil
		}
		// A live session of another provider or model: replace it.
		lease.Discard()
		_ = lv.Sess.Stop()
	}
	return turnSession{}, fmt.Errorf("could not switch agent %s to %s/%s", a.ID(), provName, model)
}

// turnSession is the agent's provider session held in its slot for a
// turn.
type turnSession struct {
	lease *multiplexer.Lease[*liveSession]
}

func (t turnSession) Inject() *history.History { return t.lease.Value().Inject }
func (t turnSession) Injected()                { t.lease.Value().Inject = nil }

// Away reports that the session runs away from the agent's workspace
// (provider.WorkspaceAway), on the worker it names, its copy moving
// through the agents' remote.
func (t turnSession) Away() (worker, remote string, ok bool) {
	s := t.lease.Value().Sess
	wa, is := s.(provider.WorkspaceAway)
	if !is || wa.AwayRemote() == "" {
		return "", "", false
	}
	if w, is := s.(interface{ Worker() string }); is {
		worker = w.Worker()
	}
	return worker, wa.AwayRemote(), true
}

// Lost reports that the session is gone for good (provider.Lost).
func (t turnSession) Lost() bool {
	l, ok := t.lease.Value().Sess.(provider.Lost)
	return ok && l.Lost()
}

func (t turnSession) Send(ctx context.Context, prompt string, io provider.TurnIO) (string, error) {
	return t.lease.Value().Sess.Send(ctx, prompt, io)
}

func (t turnSession) End(discard bool) {
	if !discard {
		t.lease.Release()
		return
	}
	lv := t.lease.Value()
	t.lease.Discard()
	_ = lv.Sess.Stop()
}

// open brings back (or creates) the provider session of an agent that is
// not live: from the eviction blob, from the native handle recorded at
// creation, or fresh with the history rebuilt from the log.
func (s *liveSessions) open(ctx context.Context, a *agent, provName, model string) (*liveSession, error) {
	prov, err := s.c.provider(provName)
	if err != nil {
		return nil, err
	}
	req := reopenRequest{AgentID: a.ID(), Provider: prov, ProvName: provName, Model: model}
	sess := a.Snap.Get()
	set := a.ReopenSettings()
	req.Handle = set.Handle
	req.Same = set.Provider == provName && set.Model == model
	if sess != nil && req.Same && sess.Provider == provName && sess.Model == model {
		req.Blob = sess.ProviderState
	}
	req.Spec = s.c.providerSpec(provName, a.ID(), model, set.Instructions, set.Cwd, set.Sandbox, nil)
	ps, inject, err := s.reopen(ctx, req, a)
	if err != nil {
		return nil, err
	}
	return &liveSession{Sess: ps, Provider: provName, Model: model, Inject: inject}, nil
}

// agentHistory is agent a's history from its log. The turn being
// started is not history, unless it re-runs an interrupted or resumed run
// (then its earlier calls show as interrupted in the block).
func (s *liveSessions) agentHistory(ctx context.Context, a *agent) (history.History, error) {
	h, err := s.history(ctx, a.ID())
	if err != nil {
		return h, err
	}
	if h.Open != nil && a.StartsRun(h.Open.RunID) {
		h.Open = nil
	}
	return h, nil
}

// history rebuilds agent id's completed turns from its log, streaming it:
// only the entries of turns are kept (never the messages, whose payloads
// may be most of the log).
func (s *liveSessions) history(ctx context.Context, id string) (history.History, error) {
	r, err := s.c.st.Read(ctx, id, 0, 0)
	if err != nil {
		return history.History{}, fmt.Errorf("reading the log of agent %s for its history: %w", id, err)
	}
	defer r.Close()
	var hs []history.Entry
	for {
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return history.History{}, fmt.Errorf("reading the log of agent %s for its history: %w", id, err)
		}
		switch e.Event {
		case schema.TurnStart, schema.TurnComplete, schema.TurnFailed, schema.TurnCancelled, schema.ToolCall, schema.RunInterrupted, schema.RunWaiting, schema.RunResumed, schema.ContextReset:
			hs = append(hs, history.Entry{Seq: e.Seq, Event: e.Event, Data: e.Data})
		}
	}
	return history.Build(hs)
}

// evict is the multiplexer's eviction: suspend the provider session, save
// its blob in session.json, log suspend.result, stop it.
func (s *liveSessions) evict(ctx context.Context, id string, lv *liveSession) error {
	defer func() { _ = lv.Sess.Stop() }()
	blob, err := lv.Sess.Suspend(ctx)
	if l, ok := lv.Sess.(provider.Lost); err != nil && ok && l.Lost() {
		// Its worker is gone, and the session's state with it: there is
		// nothing to save, and the next open restores the agent from its
		// log (its handle or its history), as after a lost worker.
		s.c.log.Warn("the session's worker is gone; nothing of it to save", "agent", id, "err", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("suspending the session of agent %s: %w", id, err)
	}
	a, ok := s.c.agent(id)
	if !ok {
		return nil
	}
	a.Snap.Change(a.ID(), s.c.now, func(ss *session.Session) {
		ss.ProviderState = blob
		ss.Provider, ss.Model = lv.Provider, lv.Model
	})
	// The blob must be on disk before the provider session stops. The
	// snapshot and suspend.result are written at the same time: recovery
	// restores a blob only when suspend.result is the last session event,
	// and without one it falls back to the handle or the history.
	logged := make(chan error, 1)
	go func() {
		_, err := a.Append(schema.SuspendResult, schema.SuspendResultData{StateSize: len(blob)})
		logged <- err
	}()
	ferr := s.c.snaps.Flush(&a.Snap)
	lerr := <-logged
	if ferr != nil {
		return fmt.Errorf("saving the evicted session of agent %s: %w", id, ferr)
	}
	if lerr != nil {
		return fmt.Errorf("logging the eviction of agent %s: %w", id, lerr)
	}
	return nil
}

// reopen brings back the provider session of an agent that is not
// live (after an eviction, a restart, or a change of provider or model),
// choosing how: from the eviction blob in session.json, from the
// provider's native handle in the log, or a fresh session given the
// agent's history rebuilt from the log (as structured turns, or injected
// into the first prompt). It logs the choice (session.restored, with
// session.created for a fresh session) and updates session.json; the
// engine's multiplexer decides when.
//
// A restore that fails in a way a fresh session answers falls back to
// one; a dead transport on a provider with native resume does not (a
// fresh session would lose the provider's own state for good): the turn
// fails, transiently, and the next one tries the handle again.

// reopenRequest is what is known of the session to open.
type reopenRequest struct {
	AgentID  string
	Provider provider.Provider
	ProvName string // the provider entry's name
	Model    string
	// Spec is the session's spec (its History is filled in here).
	Spec provider.Spec
	// Handle is the provider's native handle recorded in the log.
	Handle string
	// Same says the recorded session is of this provider and model.
	Same bool
	// Blob is the eviction blob from session.json (nil: none).
	Blob []byte
}

// reopen brings back (or creates) the provider session of an agent that is
// not live: from the eviction blob, from the native handle, or fresh with
// the history rebuilt from the log; it logs which. inject is the history
// block the first prompt must carry (a provider without structured
// history), or nil.
func (s *liveSessions) reopen(ctx context.Context, req reopenRequest, a *agent) (ps provider.Session, inject *history.History, err error) {
	o := &sessionOpen{reopenRequest: req, s: s, a: a, caps: req.Provider.Capabilities()}
	if ps, done, err := o.restore(ctx); done {
		return ps, nil, err
	}
	return o.fresh(ctx)
}

// sessionOpen is one Open: the request, and the history, read from the log
// only when a step needs it (not for a restore from an eviction blob or a
// native handle).
type sessionOpen struct {
	reopenRequest
	s           *liveSessions
	a           *agent
	caps        provider.Capabilities
	h           history.History
	haveHistory bool
}

// loadHistory reads the agent's history once.
func (o *sessionOpen) loadHistory(ctx context.Context) error {
	if o.haveHistory {
		return nil
	}
	h, err := o.s.agentHistory(ctx, o.a)
	if err != nil {
		return err
	}
	o.h, o.haveHistory = h, true
	return nil
}

// restore tries the eviction blob or the native handle. Its second result
// (done) is false when there is neither, or when the restore failed in a
// way a fresh session with the history answers.
func (o *sessionOpen) restore(ctx context.Context) (provider.Session, bool, error) {
	useBlob := len(o.Blob) > 0
	useHandle := o.Same && o.Handle != "" && (o.caps.NativeResume || o.caps.StructuredHistory)
	if !useBlob && !useHandle {
		return nil, false, nil
	}
	strategy := schema.RestoreNative
	if (useBlob && o.caps.HistoryOnRestore) || (!useBlob && o.caps.StructuredHistory) {
		// HistoryOnRestore: the blob is a handle, the conversation comes
		// from the log.
		if err := o.loadHistory(ctx); err != nil {
			return nil, true, err
		}
		o.Spec.History = o.h.Turns
		if !useBlob && !o.caps.NativeResume {
			strategy = schema.RestoreHistory
		}
	}
	s, err := o.Provider.Restore(ctx, o.Spec, o.Blob, o.Handle)
	if err == nil {
		method := ""
		if rb, ok := s.(provider.RestoredBy); ok {
			method = rb.RestoredBy()
		}
		if err := o.logRestored(strategy, method); err != nil {
			_ = s.Stop()
			return nil, true, err
		}
		if useBlob {
			// The blob is consumed: once the session takes more turns it
			// is stale, and a restart must not restore from it (the
			// handle and the log are current).
			o.s.c.snaps.Update(&o.a.Snap, o.a.ID(), func(s2 *session.Session) { s2.ProviderState = nil }, nil)
		}
		return s, true, nil
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
	o.s.c.log.Warn("native restore failed; starting a fresh session with the history", "agent", o.AgentID, "provider", o.ProvName, "err", err)
	return nil, false, nil
}

// fresh creates a new session, with the history given as structured turns
// or injected into the first prompt, and logs it.
func (o *sessionOpen) fresh(ctx context.Context) (provider.Session, *history.History, error) {
	if err := o.loadHistory(ctx); err != nil {
		return nil, nil, err
	}
	if o.caps.StructuredHistory {
		o.Spec.History = o.h.Turns
	}
	s, err := o.Provider.Create(ctx, o.Spec)
	if err != nil {
		return nil, nil, err
	}
	var inject *history.History
	strategy := schema.RestoreFresh
	if len(o.h.Turns) > 0 || o.h.Open != nil {
		strategy = schema.RestoreHistory
		if !o.caps.StructuredHistory {
			h := o.h
			inject = &h
		}
	}
	recs := []eventlog.Record{
		{Event: schema.SessionCreated, Data: schema.SessionCreatedData{Provider: o.ProvName, Model: o.Model, Handle: s.Handle()}},
		{Event: schema.SessionRestored, Data: schema.SessionRestoredData{Provider: o.ProvName, Model: o.Model, Strategy: strategy}},
	}
	if _, err := o.a.AppendBatch(recs); err != nil {
		_ = s.Stop()
		return nil, nil, fmt.Errorf("logging the new session of agent %s: %w", o.AgentID, err)
	}
	o.s.c.snaps.Update(&o.a.Snap, o.a.ID(), func(s2 *session.Session) {
		s2.Provider, s2.Model, s2.Handle, s2.ProviderState = o.ProvName, o.Model, s.Handle(), nil
	}, nil)
	return s, inject, nil
}

func (o *sessionOpen) logRestored(strategy, method string) error {
	if _, err := o.a.Append(schema.SessionRestored, schema.SessionRestoredData{Provider: o.ProvName, Model: o.Model, Strategy: strategy, Method: method}); err != nil {
		return fmt.Errorf("logging the restore of agent %s: %w", o.AgentID, err)
	}
	return nil
}

// An agent's session.json snapshot is written behind the log
// (snapshots.go, c.snaps).

// saveSession updates the agent's session.json snapshot through f and has
// it written in the background (snapshots.go). (Checkpoints follow the
// log's growth, not these saves: ckptwrite.go.)
func (c *Core) saveSession(a *agent, f func(s *session.Session)) {
	c.snaps.Update(&a.Snap, a.ID(), f, nil)
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
