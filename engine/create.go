package engine

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/warren-dev/warren/agentspec"
	"github.com/warren-dev/warren/engine/internal/claims"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/launch"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/sandbox"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/session"
	"github.com/warren-dev/warren/store"
	"github.com/warren-dev/warren/tree"
)

// An agent's creation: CreateAgent checks the spec (provider, model, name,
// texts, a live parent), reserves the name in the tree, opens the provider
// session (its handle goes into session.created), opens the log and
// writes agent.created and session.created in one write, binds the agent
// to the log, gives it its session.json snapshot, adopts it and saves
// session.json in the background. Any failure before the adoption undoes
// what came before it: the provider session is abandoned, the reservation
// removed, a directory the failed write left removed. A repeated create
// (the id is in the tree) returns the id and does nothing.

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
	// Bootstrap: a spawned child, which owes one bootstrap turn (recorded
	// in agent.created, so that recovery knows it); false for an agent
	// the operator creates.
	Bootstrap bool
	// Workspace, when set, gives the agent a workspace (workspaces.go),
	// which becomes its Cwd.
	Workspace *WorkspaceRequest
	// Sandbox asks for a sandbox (sandboxes.go); an agent whose provider
	// entry has one, or whose parent is sandboxed, gets one anyway.
	Sandbox bool
	// Budget is the agent's budget (budgets.go; nil: none, or for a root
	// the config's default). By is the operator, or the parent granting
	// it (spawn_agent: checked against the parent's remaining).
	Budget *schema.BudgetSetData

	// sandbox is the resolved sandbox (logged in agent.created).
	sandbox *schema.SandboxData
	// made is the workspace made for the agent (nil: none).
	made *schema.WorkspaceData
}

// CreateAgent creates an agent durably: its provider session, its log with
// agent.created and session.created in one write, and session.json. The
// agent exists (and survives any crash) once it returns nil.
func (c *Core) CreateAgent(ctx context.Context, spec CreateSpec) (string, error) {
	prov, err := c.checkCreate(ctx, &spec)
	if err != nil {
		return "", err
	}
	id := spec.ID
	if id == "" {
		id = newID()
	}
	if exists, err := c.reserveCreate(id, spec); exists || err != nil {
		if exists {
			return id, nil
		}
		return "", err
	}
	created := false
	defer func() {
		if !created {
			c.agents.Unreserve(id)
		}
	}()

	// The workspace first (the agent's process starts in it), then the
	// provider session: its handle goes into session.created.
	var ws *schema.WorkspaceData
	if spec.Workspace != nil {
		if ws, err = c.makeWorkspace(ctx, id, &spec); err != nil {
			return "", err
		}
		spec.made = ws
		defer func() {
			if !created && ws != nil {
				c.dropWorkspace(ctx, id, ws)
			}
		}()
	}
	if spec.sandbox != nil {
		if err := c.makePrivateHome(id, spec.Provider); err != nil {
			return "", err
		}
		defer func() {
			if !created {
				c.dropPrivateHome(id)
			}
		}()
	}
	s, err := c.sessions.Create(ctx, prov, id, spec)
	if err != nil {
		return "", err
	}
	a, err := c.logCreation(ctx, id, spec, s, ws)
	if err != nil {
		return "", err
	}
	c.agents.Put(id, a)
	created = true
	s.Keep()
	// session.json is a snapshot: the log already holds everything needed
	// to rebuild it, so it is written in the background.
	c.saveSession(a, func(*session.Session) {})
	c.log.Info("agent created", "agent", id, "name", spec.Name, "parent", spec.ParentID, "provider", spec.Provider)
	return id, nil
}

// checkCreate fills in spec's provider and model defaults and checks the
// spec: a known provider serving the model, a valid name, instructions
// and metadata within the limits, a live parent.
func (c *Core) checkCreate(ctx context.Context, spec *CreateSpec) (provider.Provider, error) {
	if spec.Provider == "" {
		if c.opts.DefaultProvider == "" {
			return nil, failf(ErrInvalid, "no provider named and no default provider configured: name one")
		}
		spec.Provider = c.opts.DefaultProvider
		if spec.Model == "" {
			spec.Model = c.opts.DefaultModel
		}
	}
	prov, err := c.provider(spec.Provider)
	if err != nil {
		return nil, err
	}
	if wants, copies := c.config().WantsWorkspace(spec.Provider); wants || spec.Workspace != nil {
		// The entry's workspace setting: every agent of it gets one.
		if spec.Workspace == nil {
			spec.Workspace = &WorkspaceRequest{FromParent: spec.ParentID != "", Always: true}
		}
		if len(spec.Workspace.Copy) == 0 {
			spec.Workspace.Copy = copies
		}
		spec.Workspace.Always = spec.Workspace.Always || wants
	}
	if err := c.checkModel(spec.Provider, &spec.Model); err != nil {
		return nil, err
	}
	if err := c.resolveSandbox(ctx, spec); err != nil {
		return nil, err
	}
	if spec.Budget == nil && spec.ParentID == "" {
		spec.Budget = c.config().DefaultBudget(spec.Provider)
	}
	if err := c.checkBudgetFor(spec.Provider, spec.Model, spec.Budget); err != nil {
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
		if !ok || pa.Terminated() {
			return nil, failf(ErrNotFound, "parent agent %s not found", spec.ParentID)
		}
		if err := c.checkDepth(spec.ParentID); err != nil {
			return nil, failf(ErrInvalid, "%w", err)
		}
	}
	return prov, nil
}

// reserveCreate adds the new agent to the tree (its name taken under its
// parent); exists says an agent with this id is there already (a
// repeated create).
func (c *Core) reserveCreate(id string, spec CreateSpec) (exists bool, err error) {
	closed, err := c.agents.Reserve(id, spec.Name, spec.ParentID)
	switch {
	case closed:
		return false, failf(ErrShuttingDown, "daemon is shutting down")
	case errors.Is(err, tree.ErrExists):
		return true, nil
	case err != nil:
		return false, failf(ErrInvalid, "%w", err)
	}
	return false, nil
}

// logCreation opens the new agent's log and writes agent.created and
// session.created in one batch, then gives the agent its session.json
// snapshot. On failure it abandons the provider session, removes what it
// wrote and drops its claim on the id.
func (c *Core) logCreation(ctx context.Context, id string, spec CreateSpec, s newSession, ws *schema.WorkspaceData) (*agent, error) {
	handle := s.Handle()
	var a *agent
	lg, err := c.openLog(ctx, id, &a)
	if err != nil {
		s.Abandon()
		c.claims.Drop(ctx, id)
		return nil, fmt.Errorf("opening the log of new agent %s: %w", id, err)
	}
	// A log with entries is not new: on a cluster another daemon may
	// have made this agent (the same id).
	if n := lg.LastSeq(); n > 0 {
		s.Abandon()
		_ = lg.Close()
		c.claims.Drop(ctx, id)
		return nil, fmt.Errorf("agent %s already has a log of %d entries (on a cluster, another daemon may run it)", id, n)
	}
	// Bound before the first append, so the creation's entries are folded
	// into its projection as they commit.
	a = newAgent(id, lg, newProjection())
	a.CountIn(&c.pending)
	if _, err := lg.AppendBatch(createdRecords(id, spec, handle, c.now(), ws)); err != nil {
		s.Abandon()
		_ = lg.Close()
		c.removeOrphanDir(id)
		c.claims.Drop(ctx, id)
		return nil, fmt.Errorf("logging the creation of agent %s: %w", id, err)
	}
	now := c.now().UTC()
	a.Snap.Set(&session.Session{ID: id, State: session.StateIdle, Provider: spec.Provider, Model: spec.Model,
		Handle: handle, CreatedAt: now, UpdatedAt: now})
	return a, nil
}

// createdRecords are the first entries of agent id's log, written in one
// write: agent.created (created at now) and session.created with the
// provider session's handle, and workspace.created for an agent with a
// workspace (ws).
func createdRecords(id string, spec CreateSpec, handle string, now time.Time, ws *schema.WorkspaceData) []eventlog.Record {
	var parent *string
	if spec.ParentID != "" {
		parent = &spec.ParentID
	}
	md := spec.Metadata
	if md == nil {
		md = map[string]string{}
	}
	recs := []eventlog.Record{
		{Event: schema.AgentCreated, Data: schema.AgentCreatedData{AgentID: id, Name: spec.Name, ParentID: parent,
			Instructions: spec.Instructions, Provider: spec.Provider, Model: spec.Model, Metadata: md,
			CreatedAt: now.UTC().Format(time.RFC3339Nano), Cwd: spec.Cwd, Bootstrap: spec.Bootstrap, Workspace: ws,
			Sandbox: spec.sandbox}},
		{Event: schema.SessionCreated, Data: schema.SessionCreatedData{Provider: spec.Provider, Model: spec.Model, Handle: handle}},
	}
	if ws != nil {
		recs = append(recs, eventlog.Record{Event: schema.WorkspaceCreated, Data: *ws})
	}
	if spec.Budget != nil {
		b := *spec.Budget
		if b.By == "" {
			b.By = schema.ByOperator
		}
		recs = append(recs, eventlog.Record{Event: schema.BudgetSet, Data: b})
	}
	return recs
}

// openLog opens an agent's log with the projection and the event bus wired
// to its appends.
func (c *Core) openLog(ctx context.Context, id string, target **agent) (store.Log, error) {
	return c.openLogReplay(ctx, id, target, nil, nil, nil)
}

// openLogReplay opens an agent's log, handing each recovered entry to
// replay (recovery folds the projection in the same pass that checks the
// log). With a replay function (recovery) a missing log is not created: the
// error wraps fs.ErrNotExist.
func (c *Core) openLogReplay(ctx context.Context, id string, target **agent, resume *eventlog.Resume, buf []byte, replay func(eventlog.Entry) error) (store.Log, error) {
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
	opts.ReadBuffer = buf
	opts.OnAppend = func(es []eventlog.Entry) {
		if a := *target; a != nil {
			due := a.ApplyCommitted(es, c.opts.CheckpointEvery, func(e eventlog.Entry, err error) {
				c.log.Error("applying logged event", "agent", id, "seq", e.Seq, "event", e.Event, "err", err)
			})
			if due {
				c.ckpts.Soon(a)
			}
		}
		c.bus.Publish(id, es)
	}
	lg, err := c.st.OpenLog(ctx, id, opts)
	if err != nil {
		return nil, err
	}
	return claims.Fenced(lg, func(cause error) { c.releaseAgent(id, cause) }), nil
}

// providerSpec is the provider spec of agent id's session (package
// agentspec): its system prompt, identity, process environment and
// history mode (made: the workspace of an agent being created).
func (c *Core) providerSpec(provName, id, model, instructions, cwd string, sb *schema.SandboxData, made *schema.WorkspaceData) provider.Spec {
	entry := c.config().Providers[provName]
	var mode string
	var modeSet bool
	if a, ok := c.agent(id); ok {
		mode, modeSet = a.Metadata(agentspec.HistoryModeKey)
	}
	env := agentspec.Env{Environ: c.opts.Environ, Extra: c.opts.Env, PythonPath: c.opts.PythonPath, SocketPath: c.opts.SocketPath}
	procEnv := agentspec.ProcessEnv(entry, env, id)
	lsb := c.launchSandbox(id, sb, made)
	if lsb != nil {
		procEnv = provider.MergeEnv(procEnv, c.sandboxEnv(id))
	}
	ps := provider.Spec{AgentID: id, Model: model, Instructions: instructions, Cwd: cwd,
		System: agentspec.SystemPrompt(c.tree, id, instructions),
		Env:    procEnv, Launcher: c.launches.For(id, lsb),
		Identity: agentspec.Identity(c.tree, id), HistoryMode: agentspec.HistoryMode(mode, modeSet, entry),
		Local: c.mustRunHere(cwd), Sandbox: sandboxSpec(lsb)}
	if remote := c.config().WorkerRemote(provName); ps.Local != "" && remote != "" {
		// The workspace moves to the worker through the agents' remote.
		ps.Local, ps.Workspace = "", c.awaySpec(id, remote, made)
	}
	return ps
}

// sandboxSpec is the sandbox of a launch (nil: none).
func sandboxSpec(lsb *launch.Sandbox) *sandbox.Spec {
	if lsb == nil {
		return nil
	}
	sp := lsb.Spec
	return &sp
}

// mustRunHere says why a session must run on the daemon's machine, not
// on a remote worker ("" when it may): a workspace is built here, and
// moves to a worker only through an agents' remote (providerSpec). (A
// worker builds a sandbox itself from Spec.Sandbox, and serves an acp
// agent's bridge a socket of its own.)
func (c *Core) mustRunHere(cwd string) string {
	if cwd != "" && strings.HasPrefix(cwd, c.workspacesDir()+string(filepath.Separator)) {
		return "its workspace"
	}
	return ""
}

// provider looks a provider up by name; an unknown one is code 2 naming the
// known providers. With remote workers (CoreOptions.Place) its sessions
// open on a worker when one has a free slot.
func (c *Core) provider(name string) (provider.Provider, error) {
	if p, ok := c.providers.Lookup(name); ok {
		if c.opts.Place != nil {
			return c.opts.Place(name, p, c.config().WorkerLabels(name)), nil
		}
		return p, nil
	}
	return nil, failf(ErrInvalid, "unknown provider %q (known: %s)", name, strings.Join(c.providers.Names(), ", "))
}
