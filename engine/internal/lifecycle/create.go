package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/warren-dev/warren/engine/internal/domainerr"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/session"
	"github.com/warren-dev/warren/tree"
)

// Create creates an agent durably: its provider session, its log with
// agent.created and session.created in one write, and session.json. The
// agent exists (and survives any crash) once Create returns nil.
func (l Lifecycle) Create(ctx context.Context, spec Spec) (string, error) {
	h := l.Host
	prov, err := l.check(&spec)
	if err != nil {
		return "", err
	}
	id := spec.ID
	if id == "" {
		id = h.NewID()
	}
	if exists, err := l.reserve(id, spec); exists || err != nil {
		if exists {
			return id, nil
		}
		return "", err
	}
	created := false
	defer func() {
		if !created {
			h.Unreserve(id)
		}
	}()

	// The provider session first: its handle goes into session.created.
	s, err := h.OpenSession(ctx, prov, id, spec)
	if err != nil {
		return "", err
	}
	lg, a, err := l.logCreation(id, spec, s)
	if err != nil {
		return "", err
	}
	lg.Adopt()
	created = true
	s.Keep()
	// session.json is a snapshot: the log already holds everything needed
	// to rebuild it, so it is written in the background.
	a.Save(func(*session.Session) {})
	l.Log.Info("agent created", "agent", id, "name", spec.Name, "parent", spec.ParentID, "provider", spec.Provider)
	return id, nil
}

// check fills in spec's provider and model defaults and checks the spec:
// a known provider serving the model, a valid name, instructions and
// metadata within the limits, a live parent.
func (l Lifecycle) check(spec *Spec) (provider.Provider, error) {
	h := l.Host
	if spec.Provider == "" {
		if l.DefaultProvider == "" {
			return nil, domainerr.New(domainerr.Invalid, "no provider named and no default provider configured: name one")
		}
		spec.Provider = l.DefaultProvider
		if spec.Model == "" {
			spec.Model = l.DefaultModel
		}
	}
	prov, err := h.Provider(spec.Provider)
	if err != nil {
		return nil, err
	}
	if err := h.CheckModel(spec.Provider, &spec.Model); err != nil {
		return nil, err
	}
	if err := h.Served(prov, spec.Provider, spec.Model); err != nil {
		return nil, err
	}
	if err := tree.ValidateName(spec.Name); err != nil {
		return nil, domainerr.New(domainerr.Invalid, "%w", err)
	}
	if err := h.CheckText(spec.Instructions, spec.Metadata); err != nil {
		return nil, domainerr.New(domainerr.Invalid, "%w", err)
	}
	if spec.ParentID != "" {
		pa, err := h.Lookup(spec.ParentID)
		if err != nil || pa.Look().Terminated {
			return nil, domainerr.New(domainerr.NotFound, "parent agent %s not found", spec.ParentID)
		}
	}
	return prov, nil
}

// reserve adds the new agent to the tree (its name taken under its
// parent); exists says an agent with this id is there already (a repeated
// create).
func (l Lifecycle) reserve(id string, spec Spec) (exists bool, err error) {
	closed, err := l.Host.Reserve(id, spec.Name, spec.ParentID)
	switch {
	case closed:
		return false, domainerr.New(domainerr.ShuttingDown, "daemon is shutting down")
	case errors.Is(err, tree.ErrExists):
		return true, nil
	case err != nil:
		return false, domainerr.New(domainerr.Invalid, "%w", err)
	}
	return false, nil
}

// logCreation opens the new agent's log and writes agent.created and
// session.created in one batch, then gives the agent its session.json
// snapshot. On failure it abandons the provider session and removes what
// it wrote.
func (l Lifecycle) logCreation(id string, spec Spec, s Session) (NewLog, Agent, error) {
	h := l.Host
	handle := s.Handle()
	lg, err := h.OpenLog(id)
	if err != nil {
		s.Abandon()
		return nil, nil, fmt.Errorf("opening the log of new agent %s: %w", id, err)
	}
	if n := lg.LastSeq(); n > 0 {
		// A log holding entries is an agent (on a cluster store, one
		// another daemon runs): never a second agent.created on it.
		s.Abandon()
		_ = lg.Close()
		h.DropLease(id)
		return nil, nil, fmt.Errorf("agent %s already has a log of %d entries (on a cluster, another daemon may run it)", id, n)
	}
	a := lg.Bind()
	if err := lg.AppendBatch(CreatedRecords(id, spec, handle, l.Now())); err != nil {
		s.Abandon()
		_ = lg.Close()
		h.RemoveOrphanDir(id)
		return nil, nil, fmt.Errorf("logging the creation of agent %s: %w", id, err)
	}
	now := l.Now().UTC()
	a.SetSnapshot(&session.Session{ID: id, State: session.StateIdle, Provider: spec.Provider, Model: spec.Model,
		Handle: handle, CreatedAt: now, UpdatedAt: now})
	return lg, a, nil
}

// CreatedRecords are the first entries of agent id's log, written in one
// write: agent.created (created at now) and session.created with the
// provider session's handle.
func CreatedRecords(id string, spec Spec, handle string, now time.Time) []eventlog.Record {
	var parent *string
	if spec.ParentID != "" {
		parent = &spec.ParentID
	}
	md := spec.Metadata
	if md == nil {
		md = map[string]string{}
	}
	return []eventlog.Record{
		{Event: schema.AgentCreated, Data: schema.AgentCreatedData{AgentID: id, Name: spec.Name, ParentID: parent,
			Instructions: spec.Instructions, Provider: spec.Provider, Model: spec.Model, Metadata: md,
			CreatedAt: now.UTC().Format(time.RFC3339Nano), Cwd: spec.Cwd}},
		{Event: schema.SessionCreated, Data: schema.SessionCreatedData{Provider: spec.Provider, Model: spec.Model, Handle: handle}},
	}
}
