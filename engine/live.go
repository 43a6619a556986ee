// Package live holds the agents' live provider sessions. While an agent's
// provider session is live it sits in a slot of the multiplexer (package
// multiplexer), one per agent, in the pool of its provider:
//
//   - a new agent creates it (Create) and keeps it in the slot once its
//     creation is durable, or abandons it;
//   - a turn acquires it (Acquire) for the turn's provider and model: a
//     live session of another provider or model is stopped and replaced;
//     a session that is not live is brought back (package reopen) from
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
// None of its own. The multiplexer's lock and the snapshot's (package
// snapsave) are leaves; an eviction appends to the agent's log and writes
// its snapshot holding neither; the record's methods (package agentrec)
// take its lock for each read.
package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/agentspec"
	"github.com/warren-dev/warren/history"
	"github.com/warren-dev/warren/multiplexer"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/reopen"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/session"
	"github.com/warren-dev/warren/store"
)

// liveSession is a provider session held in a multiplexer slot.
type liveSession struct {
	Sess     provider.Session
	Provider string
	Model    string
	// Inject is the history block the first prompt of this provider
	// session must carry (providers without structured history), once.
	Inject *history.History
}

// liveOptions are what the sessions need of the engine.
type liveOptions struct {
	// Lookup finds a live agent's record.
	Lookup func(id string) (*agent, bool)
	// Provider looks a provider entry up (an unknown one is refused).
	Provider func(name string) (provider.Provider, error)
	// Spec is the provider spec of agent id's session (package agentspec).
	Spec func(provName, id, model, instructions, cwd string) provider.Spec
	// Read reads an agent's log from a seq (store.Store.Read).
	Read func(ctx context.Context, id string, fromSeq uint64, hint int64) (store.Reader, error)
	// Snaps writes the session.json snapshots.
	Snaps  *snapshotWriter
	Now    func() time.Time
	Logger hclog.Logger
}

// liveSessions are the live provider sessions of one engine's agents.
type liveSessions struct {
	o   liveOptions
	mux *multiplexer.Mux[*liveSession]
}

// newLiveSessions makes the sessions, their slots in pools as cfg says.
func newLiveSessions(cfg multiplexer.Config, o liveOptions) *liveSessions {
	s := &liveSessions{o: o}
	s.mux = multiplexer.New[*liveSession](cfg, s.evict, o.Logger.Named("mux"))
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
		ps := s.o.Spec(spec.Provider, id, spec.Model, spec.Instructions, spec.Cwd)
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
	prov, err := s.o.Provider(provName)
	if err != nil {
		return nil, err
	}
	req := reopen.Request{AgentID: a.ID(), Provider: prov, ProvName: provName, Model: model, Logger: s.o.Logger}
	sess := a.Snap.Get()
	set := a.ReopenSettings()
	req.Handle = set.Handle
	req.Same = set.Provider == provName && set.Model == model
	if sess != nil && req.Same && sess.Provider == provName && sess.Model == model {
		req.Blob = sess.ProviderState
	}
	req.Spec = s.o.Spec(provName, a.ID(), model, set.Instructions, set.Cwd)
	ps, inject, err := reopen.Open(ctx, req, reopening{a, s})
	if err != nil {
		return nil, err
	}
	return &liveSession{Sess: ps, Provider: provName, Model: model, Inject: inject}, nil
}

// reopening is what reopen needs of an agent: its log (the record's
// Append), its history and its session.json snapshot.
type reopening struct {
	*agent
	s *liveSessions
}

// History is the agent's history from its log. The turn being started is
// not history, unless it re-runs an interrupted or resumed run (then its
// earlier calls show as interrupted in the block).
func (r reopening) History() (history.History, error) {
	h, err := r.s.history(r.ID())
	if err != nil {
		return h, err
	}
	if h.Open != nil && r.StartsRun(h.Open.RunID) {
		h.Open = nil
	}
	return h, nil
}

func (r reopening) SaveSnapshot(f func(*session.Session)) {
	r.s.o.Snaps.Update(&r.Snap, r.ID(), f, nil)
}

// history rebuilds agent id's completed turns from its log, streaming it:
// only the entries of turns are kept (never the messages, whose payloads
// may be most of the log).
func (s *liveSessions) history(id string) (history.History, error) {
	r, err := s.o.Read(context.Background(), id, 0, 0)
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
	if err != nil {
		return fmt.Errorf("suspending the session of agent %s: %w", id, err)
	}
	a, ok := s.o.Lookup(id)
	if !ok {
		return nil
	}
	a.Snap.Change(a.ID(), s.o.Now, func(ss *session.Session) {
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
	ferr := s.o.Snaps.Flush(&a.Snap)
	lerr := <-logged
	if ferr != nil {
		return fmt.Errorf("saving the evicted session of agent %s: %w", id, ferr)
	}
	if lerr != nil {
		return fmt.Errorf("logging the eviction of agent %s: %w", id, lerr)
	}
	return nil
}
