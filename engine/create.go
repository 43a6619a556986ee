package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/warren-dev/warren/agentspec"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/session"
	"github.com/warren-dev/warren/store"
	"github.com/warren-dev/warren/tree"
)

// CreateSpec describes a new agent.
type CreateSpec struct {
	ID           string // "" = a fresh random id
	Name         string
	ParentID     string // "" = a root
	Instructions string
	Provider     string
	Model        string
	Metadata     map[string]string
	// Cwd is the agent's working directory (absolute; the RPC edge checks
	// it exists); "" means the daemon's.
	Cwd string
}

// openLog opens an agent's log with the projection and the event bus wired
// to its appends.
func (c *Core) openLog(id string, target **agent) (store.Log, error) {
	return c.openLogReplay(id, target, nil, nil)
}

// openLogReplay opens an agent's log, handing each recovered entry to
// replay (recovery folds the projection in the same pass that checks the
// log). With a replay function (recovery) a missing log is not created: the
// error wraps fs.ErrNotExist.
func (c *Core) openLogReplay(id string, target **agent, resume *eventlog.Resume, replay func(eventlog.Entry) error) (store.Log, error) {
	lease, err := c.own(id)
	if err != nil {
		return nil, fmt.Errorf("claiming agent %s: %w", id, err)
	}
	opts := store.LogOptions{OnHeal: func() { c.logHealed(id) }, Lease: lease}
	opts.Replay = replay
	// The projection copies what it keeps of an entry's data: recovery
	// reads every line without a copy of each.
	opts.ReplayBorrows = replay != nil
	opts.MustExist = replay != nil
	opts.Resume = resume
	opts.OnAppend = func(es []eventlog.Entry) {
		if a := *target; a != nil {
			due := a.applyCommitted(es, c.opts.CheckpointEvery, func(e eventlog.Entry, err error) {
				c.log.Error("applying logged event", "agent", id, "seq", e.Seq, "event", e.Event, "err", err)
			})
			if due {
				c.checkpointSoon(a)
			}
		}
		c.bus.Publish(id, es)
	}
	lg, err := c.st.OpenLog(context.Background(), id, opts)
	if err != nil {
		return nil, err
	}
	return &fencedLog{Log: lg, c: c, id: id}, nil
}

// CreateAgent creates an agent durably: its provider session, its log with
// agent.created and session.created in one write, and session.json. The
// agent exists (and survives any crash) once CreateAgent returns nil.
func (c *Core) CreateAgent(ctx context.Context, spec CreateSpec) (string, error) {
	prov, err := c.checkCreate(&spec)
	if err != nil {
		return "", err
	}
	id := spec.ID
	if id == "" {
		id = newID()
	}
	if exists, err := c.reserve(id, spec); exists || err != nil {
		if exists {
			return id, nil
		}
		return "", err
	}
	created := false
	defer func() {
		if !created {
			c.mu.Lock()
			_ = c.tree.Remove(id)
			c.mu.Unlock()
		}
	}()

	// The provider session first: its handle goes into session.created.
	lease, err := c.mux.Acquire(ctx, id, spec.Provider, func(ctx context.Context) (*live, error) {
		ps := c.providerSpec(spec.Provider, id, spec.Model, spec.Instructions, spec.Cwd, nil)
		if v, ok := spec.Metadata[agentspec.HistoryModeKey]; ok {
			ps.HistoryMode = v // the agent is not listed yet: its metadata is here
		}
		s, err := prov.Create(ctx, ps)
		if err != nil {
			return nil, err
		}
		return &live{sess: s, provider: spec.Provider, model: spec.Model}, nil
	})
	if err != nil {
		return "", wrapSlotErr(fmt.Errorf("creating the %s session: %w", spec.Provider, err))
	}
	lv := lease.Value()
	a, err := c.logCreation(id, spec, lv.sess.Handle(), func() {
		lease.Discard()
		_ = lv.sess.Stop()
	})
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	c.agents[id] = a
	c.mu.Unlock()
	created = true
	lease.Release()
	// session.json is a snapshot: the log already holds everything needed
	// to rebuild it, so it is written in the background.
	c.saveSession(a, func(*session.Session) {})
	c.log.Info("agent created", "agent", id, "name", spec.Name, "parent", spec.ParentID, "provider", spec.Provider)
	return id, nil
}

// checkCreate fills in spec's provider and model defaults and checks the
// spec: a known provider serving the model, a valid name, instructions and
// metadata within the limits, a live parent.
func (c *Core) checkCreate(spec *CreateSpec) (provider.Provider, error) {
	if spec.Provider == "" {
		spec.Provider = c.opts.DefaultProvider
		if spec.Model == "" {
			spec.Model = c.opts.DefaultModel
		}
	}
	prov, err := c.provider(spec.Provider)
	if err != nil {
		return nil, err
	}
	if err := c.checkModel(spec.Provider, &spec.Model); err != nil {
		return nil, err
	}
	if err := checkServed(prov, spec.Provider, spec.Model); err != nil {
		return nil, err
	}
	if err := tree.ValidateName(spec.Name); err != nil {
		return nil, failf(ErrInvalid, "%w", err)
	}
	if err := c.checkAgentText(spec.Instructions, spec.Metadata); err != nil {
		return nil, failf(ErrInvalid, "%w", err)
	}
	if spec.ParentID != "" {
		pa, ok := c.agent(spec.ParentID)
		if !ok || pa.terminated() {
			return nil, failf(ErrNotFound, "parent agent %s not found", spec.ParentID)
		}
	}
	return prov, nil
}

// reserve adds the new agent to the tree (its name taken under its
// parent); exists says an agent with this id is there already (a repeated
// create).
func (c *Core) reserve(id string, spec CreateSpec) (exists bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false, failf(ErrShuttingDown, "daemon is shutting down")
	}
	if err := c.tree.Add(id, spec.Name, spec.ParentID); err != nil {
		if errors.Is(err, tree.ErrExists) {
			return true, nil
		}
		return false, failf(ErrInvalid, "%w", err)
	}
	return false, nil
}

// logCreation opens the new agent's log and writes agent.created and
// session.created in one batch, then gives the agent its session.json
// snapshot. On failure it calls abandon (the provider session is dropped)
// and removes what it wrote.
func (c *Core) logCreation(id string, spec CreateSpec, handle string, abandon func()) (*agent, error) {
	var a *agent
	lg, err := c.openLog(id, &a)
	if err != nil {
		abandon()
		return nil, fmt.Errorf("opening the log of new agent %s: %w", id, err)
	}
	if lg.LastSeq() > 0 {
		// A log holding entries is an agent (on a cluster store, one
		// another daemon runs): never a second agent.created on it.
		abandon()
		_ = lg.Close()
		c.dropLease(id)
		return nil, fmt.Errorf("agent %s already has a log of %d entries (on a cluster, another daemon may run it)", id, lg.LastSeq())
	}
	a = newAgent(id, lg, newProjection())
	a.p.Pending.Attach(&c.pending)
	var parent *string
	if spec.ParentID != "" {
		parent = &spec.ParentID
	}
	md := spec.Metadata
	if md == nil {
		md = map[string]string{}
	}
	_, err = lg.AppendBatch([]eventlog.Record{
		{Event: schema.AgentCreated, Data: schema.AgentCreatedData{AgentID: id, Name: spec.Name, ParentID: parent,
			Instructions: spec.Instructions, Provider: spec.Provider, Model: spec.Model, Metadata: md,
			CreatedAt: c.now().UTC().Format(time.RFC3339Nano), Cwd: spec.Cwd}},
		{Event: schema.SessionCreated, Data: schema.SessionCreatedData{Provider: spec.Provider, Model: spec.Model, Handle: handle}},
	})
	if err != nil {
		abandon()
		_ = lg.Close()
		c.removeOrphanDir(id)
		return nil, fmt.Errorf("logging the creation of agent %s: %w", id, err)
	}
	now := c.now().UTC()
	a.snap.Set(&session.Session{ID: id, State: session.StateIdle, Provider: spec.Provider, Model: spec.Model,
		Handle: handle, CreatedAt: now, UpdatedAt: now})
	return a, nil
}

// removeOrphanDir removes the directory of an agent whose creation failed
// before agent.created was durable.
func (c *Core) removeOrphanDir(id string) {
	dir := c.agentDir(id)
	entries, err := c.fs.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		_ = c.fs.Remove(dir + "/" + e.Name())
	}
	_ = c.fs.Remove(dir)
	_ = c.fs.SyncDir(c.agentsDir)
}

func (c *Core) providerSpec(provName, id, model, instructions, cwd string, history []provider.Turn) provider.Spec {
	entry := c.config().Providers[provName]
	var mode string
	var modeSet bool
	if a, ok := c.agent(id); ok {
		a.mu.Lock()
		mode, modeSet = a.p.Metadata[agentspec.HistoryModeKey]
		a.mu.Unlock()
	}
	env := agentspec.Env{Environ: c.opts.Environ, Extra: c.opts.Env, PythonPath: c.opts.PythonPath, SocketPath: c.opts.SocketPath}
	return provider.Spec{AgentID: id, Model: model, Instructions: instructions, Cwd: cwd,
		System: agentspec.SystemPrompt(c.tree, id, instructions),
		Env:    agentspec.ProcessEnv(entry, env, id), History: history, Launcher: c.launches.For(id),
		Identity: agentspec.Identity(c.tree, id), HistoryMode: agentspec.HistoryMode(mode, modeSet, entry)}
}

// provider looks a provider up by name; an unknown one is code 2 naming the
// known providers.
func (c *Core) provider(name string) (provider.Provider, error) {
	if p, ok := c.providers.Lookup(name); ok {
		return p, nil
	}
	return nil, failf(ErrInvalid, "unknown provider %q (known: %s)", name, strings.Join(c.providers.Names(), ", "))
}
