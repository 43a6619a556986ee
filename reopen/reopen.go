// Package reopen brings back the provider session of an agent that is not
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
package reopen

import (
	"context"
	"fmt"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/history"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/session"
)

// Restore strategies logged in session.restored.
const (
	StrategyNative  = "native"
	StrategyHistory = "history"
	StrategyFresh   = "fresh"
)

// Request is what is known of the session to open.
type Request struct {
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
	Blob   []byte
	Logger hclog.Logger
}

// Agent is what opening a session needs of the agent: its log (for
// session.created and session.restored), its history (read only when a
// step needs it) and its session.json snapshot.
type Agent interface {
	Append(event string, data any) (eventlog.Entry, error)
	AppendBatch(recs []eventlog.Record) ([]eventlog.Entry, error)
	// History is the agent's history from its log, without the turn being
	// started (unless it re-runs an earlier run).
	History() (history.History, error)
	// SaveSnapshot updates session.json through f (written in the
	// background).
	SaveSnapshot(f func(*session.Session))
}

// Open brings back (or creates) the provider session of an agent that is
// not live: from the eviction blob, from the native handle, or fresh with
// the history rebuilt from the log; it logs which. inject is the history
// block the first prompt must carry (a provider without structured
// history), or nil.
func Open(ctx context.Context, req Request, ag Agent) (s provider.Session, inject *history.History, err error) {
	if req.Logger == nil {
		req.Logger = hclog.NewNullLogger()
	}
	o := &sessionOpen{Request: req, ag: ag, caps: req.Provider.Capabilities()}
	if s, done, err := o.restore(ctx); done {
		return s, nil, err
	}
	return o.fresh(ctx)
}

// sessionOpen is one Open: the request, and the history, read from the log
// only when a step needs it (not for a restore from an eviction blob or a
// native handle).
type sessionOpen struct {
	Request
	ag          Agent
	caps        provider.Capabilities
	h           history.History
	haveHistory bool
}

// loadHistory reads the agent's history once.
func (o *sessionOpen) loadHistory() error {
	if o.haveHistory {
		return nil
	}
	h, err := o.ag.History()
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
	strategy := StrategyNative
	if (useBlob && o.caps.HistoryOnRestore) || (!useBlob && o.caps.StructuredHistory) {
		// HistoryOnRestore: the blob is a handle, the conversation comes
		// from the log.
		if err := o.loadHistory(); err != nil {
			return nil, true, err
		}
		o.Spec.History = o.h.Turns
		if !useBlob && !o.caps.NativeResume {
			strategy = StrategyHistory
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
			o.ag.SaveSnapshot(func(s2 *session.Session) { s2.ProviderState = nil })
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
	o.Logger.Warn("native restore failed; starting a fresh session with the history", "agent", o.AgentID, "provider", o.ProvName, "err", err)
	return nil, false, nil
}

// fresh creates a new session, with the history given as structured turns
// or injected into the first prompt, and logs it.
func (o *sessionOpen) fresh(ctx context.Context) (provider.Session, *history.History, error) {
	if err := o.loadHistory(); err != nil {
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
	strategy := StrategyFresh
	if len(o.h.Turns) > 0 || o.h.Open != nil {
		strategy = StrategyHistory
		if !o.caps.StructuredHistory {
			h := o.h
			inject = &h
		}
	}
	recs := []eventlog.Record{
		{Event: schema.SessionCreated, Data: schema.SessionCreatedData{Provider: o.ProvName, Model: o.Model, Handle: s.Handle()}},
		{Event: schema.SessionRestored, Data: schema.SessionRestoredData{Provider: o.ProvName, Model: o.Model, Strategy: strategy}},
	}
	if _, err := o.ag.AppendBatch(recs); err != nil {
		_ = s.Stop()
		return nil, nil, fmt.Errorf("logging the new session of agent %s: %w", o.AgentID, err)
	}
	o.ag.SaveSnapshot(func(s2 *session.Session) {
		s2.Provider, s2.Model, s2.Handle, s2.ProviderState = o.ProvName, o.Model, s.Handle(), nil
	})
	return s, inject, nil
}

func (o *sessionOpen) logRestored(strategy, method string) error {
	if _, err := o.ag.Append(schema.SessionRestored, schema.SessionRestoredData{Provider: o.ProvName, Model: o.Model, Strategy: strategy, Method: method}); err != nil {
		return fmt.Errorf("logging the restore of agent %s: %w", o.AgentID, err)
	}
	return nil
}
