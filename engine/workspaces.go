package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	fold "github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/workspace"
)

// Workspaces (SPEC 12): an agent may own a git worktree of a repository
// (package workspace), which is its working directory and where its
// agent process runs. The engine binds the worktree's state to the log:
//
//   - Create: the worktree is made before the provider session (an agent
//     CLI starts in it), and agent.created (naming it), session.created and
//     workspace.created are one write; a creation that fails after git
//     made the worktree removes it again (nothing of an agent's work is in
//     it yet).
//   - Every turn: after turn.start and before the provider is called, a
//     start snapshot (workspace.snapshot, start); before the turn's end is
//     logged, an end snapshot (end). A turn whose start snapshot fails
//     fails: it never runs on files the log could not roll back.
//   - A re-run (an interrupted run, a resumed wait) first restores its
//     start snapshot and logs workspace.restored (rerun), unless the
//     operator asked to keep the files (keep_workspace).
//   - Terminate: what is left is committed to the branch, the directory
//     removed, the branch kept (workspace.closed), before agent.terminated.
//   - Recovery: each open workspace is checked and repaired from the
//     branch (workspace.repaired); one that cannot be repaired keeps its
//     agent from running anywhere (its error says what fixes it).
//   - A child spawned by an agent with a workspace gets one of its own,
//     branched from the parent's latest end snapshot (never its live
//     files), unless spawn_agent says workspace "none".

// WorkspaceRequest asks for an agent's workspace (CreateSpec.Workspace).
type WorkspaceRequest struct {
	// Repo is a directory inside the repository ("" = the agent's cwd).
	Repo string
	// Base names the commit the branch starts at ("" = the repository's
	// HEAD).
	Base string
	// Copy lists ignored files to copy in (workspace.CopyFiles).
	Copy []string
	// FromParent: the workspace is branched from the parent's latest end
	// snapshot (a spawned child); when the parent has none: one from the
	// agent's cwd with Always (its provider entry wants one), else none.
	FromParent, Always bool
}

// workspacesDir is where the worktrees are: <home>/workspaces.
func (c *Core) workspacesDir() string {
	if c.opts.WorkspacesDir != "" {
		return c.opts.WorkspacesDir
	}
	return filepath.Join(c.opts.Home, "workspaces")
}

// wsOf is the package workspace's view of agent id's workspace w.
func wsOf(id string, w fold.Workspace) workspace.Workspace {
	return workspace.Workspace{AgentID: id, Repo: w.Repo, Path: w.Path, Branch: w.Branch, Base: w.Base}
}

// makeWorkspace makes the worktree a new agent asked for and makes it
// the agent's cwd; the data goes into agent.created and workspace.created
// (nil, and nothing made, for a child whose parent has no workspace).
func (c *Core) makeWorkspace(ctx context.Context, id string, spec *CreateSpec) (*schema.WorkspaceData, error) {
	req := spec.Workspace
	if req.FromParent {
		p, ok := c.agent(spec.ParentID)
		var w fold.Workspace
		if ok {
			w, ok = p.OpenWorkspace()
		}
		switch {
		case ok:
			req = childWorkspace(w, req.Copy)
		case !req.Always:
			spec.Workspace = nil
			return nil, nil
		}
	}
	g := c.opts.Git
	if err := c.checkGit(ctx); err != nil {
		return nil, failf(ErrInvalid, "%w", err)
	}
	dir := req.Repo
	if dir == "" {
		dir = spec.Cwd
	}
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, err
		}
		dir = wd
	}
	repo, base, err := g.Resolve(ctx, dir, req.Base)
	if err != nil {
		return nil, failf(ErrInvalid, "workspace: %w", err)
	}
	path := spec.Name
	if spec.ParentID != "" {
		path = c.Path(spec.ParentID) + "/" + spec.Name
	}
	w := workspace.Workspace{AgentID: id, Repo: repo, Path: filepath.Join(c.workspacesDir(), id), Branch: workspace.BranchName(path, id), Base: base}
	if err := os.MkdirAll(c.workspacesDir(), 0o700); err != nil {
		return nil, err
	}
	if err := g.Create(ctx, w, req.Copy); err != nil {
		if errors.Is(err, workspace.ErrBadCopy) {
			return nil, failf(ErrInvalid, "workspace: %w", err)
		}
		return nil, fmt.Errorf("making the workspace of %s: %w", spec.Name, err)
	}
	spec.Cwd = w.Path
	return &schema.WorkspaceData{Repo: w.Repo, Path: w.Path, Branch: w.Branch, Base: w.Base}, nil
}

// dropWorkspace undoes makeWorkspace for a creation that failed: the
// worktree and its branch go (the agent never ran in them).
func (c *Core) dropWorkspace(ctx context.Context, id string, d *schema.WorkspaceData) {
	w := workspace.Workspace{AgentID: id, Repo: d.Repo, Path: d.Path, Branch: d.Branch, Base: d.Base}
	if err := c.opts.Git.Discard(ctx, w); err != nil {
		c.log.Warn("removing the workspace of a creation that failed", "agent", id, "path", d.Path, "err", err)
	}
}

// snapshotTurn records a's workspace at a turn's start or end
// (workspace.snapshot); nothing for an agent without an open workspace.
// An end snapshot a worker took and the daemon brought home (from) is
// logged as it is.
func (c *Core) snapshotTurn(ctx context.Context, a *agent, runID string, turn int, at string, from handed) error {
	w, ok := a.OpenWorkspace()
	if !ok {
		return nil
	}
	commit := from.Commit
	if commit == "" {
		var err error
		if commit, err = c.opts.Git.Snapshot(ctx, wsOf(a.ID(), w), snapshotMessage(at, runID, turn), w.Last); err != nil {
			return fmt.Errorf("the %s snapshot of the workspace of %s: %w", at, a.Name(), err)
		}
	}
	_, err := a.Append(schema.WorkspaceSnapshot, schema.WorkspaceSnapshotData{RunID: runID, Turn: turn, At: at, Commit: commit, Worker: from.Worker})
	return err
}

// snapshotMessage is the message of the snapshot at at of a turn.
func snapshotMessage(at, runID string, turn int) string {
	return fmt.Sprintf("warren: %s of run %s turn %d", at, runID, turn)
}

// restoreRun puts back the start snapshot of run runID of a before it is
// re-run (workspace.restored, rerun); nothing without one.
func (c *Core) restoreRun(ctx context.Context, a *agent, runID string) error {
	w, ok := a.OpenWorkspace()
	commit := a.RunStartCommit(runID)
	if !ok || commit == "" {
		return nil
	}
	if err := c.opts.Git.Restore(ctx, wsOf(a.ID(), w), commit); err != nil {
		return fmt.Errorf("restoring the workspace of %s to the start of run %s: %w", a.Name(), runID, err)
	}
	_, err := a.Append(schema.WorkspaceRestored, schema.WorkspaceRestoredData{RunID: runID, Commit: commit, Reason: schema.RestoreRerun})
	return err
}

// closeWorkspace commits what is left in a's workspace to its branch,
// removes the directory and keeps the branch (workspace.closed), before
// a is terminated.
func (c *Core) closeWorkspace(ctx context.Context, a *agent) error {
	w, ok := a.OpenWorkspace()
	if !ok {
		return nil
	}
	head, err := c.opts.Git.Close(ctx, wsOf(a.ID(), w), c.Path(a.ID()))
	if err != nil {
		return failf(ErrWrongState, "closing the workspace of %s (its work is kept: nothing was removed): %w", a.Name(), err)
	}
	if _, err = a.Append(schema.WorkspaceClosed, schema.WorkspaceClosedData{Branch: w.Branch, Commit: head, Removed: true}); err != nil {
		return err
	}
	// An agent whose entry names an agents' remote may have run on
	// workers: its incoming ref there goes with its workspace.
	if remote := c.config().WorkerRemote(a.ReopenSettings().Provider); remote != "" {
		if err := c.opts.Git.Forget(ctx, wsOf(a.ID(), w), remote); err != nil {
			c.log.Warn("the workspace is closed, but its ref on the agents' remote is left (delete it by hand)", "agent", a.ID(), "ref", workspace.IncomingRef(a.ID()), "err", err)
		}
	}
	return nil
}

// repairWorkspaces checks the open workspace of each agent against its
// log and repairs it from its branch (workspace.repaired); an agent whose
// workspace cannot be repaired runs nowhere until it is (its status says
// why).
func (c *Core) repairWorkspaces(ctx context.Context, agents []*agent) {
	checked, gitErr := false, error(nil)
	for _, a := range agents {
		w, ok := a.OpenWorkspace()
		if !ok {
			continue
		}
		if !checked { // the start checks git's version once, if any workspace needs it
			checked = true
			gitErr = c.checkGit(ctx)
		}
		if gitErr != nil {
			c.log.Error("an agent's workspace cannot be checked; the agent runs no turn until git is fixed", "agent", a.ID(), "err", gitErr)
			a.Block(fmt.Errorf("its workspace cannot be checked: %w", gitErr))
			continue
		}
		what, err := c.opts.Git.Repair(ctx, wsOf(a.ID(), w), c.now())
		if err != nil {
			c.log.Error("an agent's workspace cannot be repaired; the agent runs no turn until it is", "agent", a.ID(), "err", err)
			a.Block(fmt.Errorf("its workspace cannot be used: %w", err))
			continue
		}
		if what == "" {
			continue
		}
		c.log.Warn("repaired an agent's workspace", "agent", a.ID(), "what", what)
		if _, err := a.Append(schema.WorkspaceRepaired, schema.WorkspaceRepairedData{Path: w.Path, What: what}); err != nil {
			c.log.Error("logging workspace.repaired", "agent", a.ID(), "err", err)
		}
	}
}

// childWorkspace is the workspace request of a child of an agent whose
// workspace is parent: the parent's repository, at its latest end
// snapshot (its base before any), never its live files.
func childWorkspace(parent fold.Workspace, copies []string) *WorkspaceRequest {
	base := parent.LastEnd
	if base == "" {
		base = parent.Base
	}
	return &WorkspaceRequest{Repo: parent.Repo, Base: base, Copy: copies}
}

// SnapshotView is one workspace snapshot as workspace.log shows it.
type SnapshotView struct {
	RunID  string
	Turn   int
	At     string // start or end
	Commit string
	TS     time.Time
	// FilesChanged counts the paths that differ from the snapshot
	// before it (-1 when git could not say).
	FilesChanged int
}

// WorkspaceLogView is an agent's workspace and its snapshots (the latest
// limit, oldest first).
type WorkspaceLogView struct {
	Repo, Path, Branch, Base string
	Closed                   bool
	Snapshots                []SnapshotView
}

// maxSnapshotsShown bounds WorkspaceLog's snapshots.
const maxSnapshotsShown = 200

// WorkspaceLog lists agent agentID's workspace snapshots, from its log.
func (c *Core) WorkspaceLog(ctx context.Context, agentID string) (WorkspaceLogView, error) {
	a, ok := c.agent(agentID)
	if !ok {
		return WorkspaceLogView{}, notFound(agentID)
	}
	w, ok := a.Workspace()
	if !ok {
		return WorkspaceLogView{}, failf(ErrInvalid, "agent %s has no workspace", a.Name())
	}
	out := WorkspaceLogView{Repo: w.Repo, Path: w.Path, Branch: w.Branch, Base: w.Base, Closed: w.Closed}
	var err error
	if out.Snapshots, err = c.snapshotsOf(ctx, a); err != nil {
		return out, err
	}
	if n := len(out.Snapshots); n > maxSnapshotsShown {
		out.Snapshots = out.Snapshots[n-maxSnapshotsShown:]
	}
	prev := w.Base
	ws := wsOf(a.ID(), w)
	for i := range out.Snapshots {
		s := &out.Snapshots[i]
		s.FilesChanged = -1
		if paths, err := c.opts.Git.Changed(ctx, ws, prev, s.Commit); err == nil {
			s.FilesChanged = len(paths)
		}
		prev = s.Commit
	}
	return out, nil
}

// snapshotsOf lists every workspace.snapshot in a's log, oldest first.
func (c *Core) snapshotsOf(ctx context.Context, a *agent) ([]SnapshotView, error) {
	es, err := c.Log(ctx, a.ID(), 0)
	if err != nil {
		return nil, err
	}
	var out []SnapshotView
	for _, e := range es {
		if e.Event != schema.WorkspaceSnapshot {
			continue
		}
		var d schema.WorkspaceSnapshotData
		if err := json.Unmarshal(e.Data, &d); err != nil {
			continue
		}
		out = append(out, SnapshotView{RunID: d.RunID, Turn: d.Turn, At: d.At, Commit: d.Commit, TS: e.TS})
	}
	return out, nil
}

// RestoreWorkspace puts one of agent agentID's snapshots back in its
// workspace (the agent must be at rest: it is claimed meanwhile), logged
// as workspace.restored (operator).
func (c *Core) RestoreWorkspace(ctx context.Context, agentID, commit string) error {
	a, ok := c.agent(agentID)
	if !ok {
		return notFound(agentID)
	}
	w, ok := a.OpenWorkspace()
	if !ok {
		return failf(ErrInvalid, "agent %s has no open workspace", a.Name())
	}
	snaps, err := c.snapshotsOf(ctx, a)
	if err != nil {
		return err
	}
	if commit, err = snapshotNamed(snaps, commit); err != nil {
		return failf(ErrInvalid, "%v of %s (warren workspace log %s lists them)", err, a.Name(), c.Path(a.ID()))
	}
	if err := a.Claim(); err != nil {
		return err
	}
	defer c.release(a)
	if err := c.opts.Git.Restore(ctx, wsOf(a.ID(), w), commit); err != nil {
		return fmt.Errorf("restoring the workspace of %s: %w", a.Name(), err)
	}
	_, err = a.Append(schema.WorkspaceRestored, schema.WorkspaceRestoredData{Commit: commit, Reason: schema.RestoreOperator})
	return err
}

// snapshotNamed finds the snapshot commit ref names: the whole hash, or
// a prefix of at least 7 hex digits that names one commit of snaps.
func snapshotNamed(snaps []SnapshotView, ref string) (string, error) {
	ref = strings.ToLower(strings.TrimSpace(ref))
	if len(ref) < 7 || strings.Trim(ref, "0123456789abcdef") != "" {
		return "", fmt.Errorf("%q is not a snapshot commit (its hash, or 7 or more of its first hex digits)", ref)
	}
	found := ""
	for _, s := range snaps {
		if strings.HasPrefix(s.Commit, ref) {
			if found != "" && found != s.Commit {
				return "", fmt.Errorf("%q names more than one snapshot (%s and %s): give more digits", ref, found, s.Commit)
			}
			found = s.Commit
		}
	}
	if found == "" {
		return "", fmt.Errorf("%q is none of the snapshots", ref)
	}
	return found, nil
}

// MergeResult is what a merge of a child's branch did.
type MergeResult struct {
	Branch, Commit string
	Conflicts      []string
}

// MergeChild merges child childID's branch into its parent's worktree
// (the child's uncommitted work committed to its branch first), logged as
// workspace.merged in the parent's log; on conflicts the merge is aborted,
// the parent's worktree left as it was, and the error (ErrInvalid) names
// the paths.
func (c *Core) MergeChild(ctx context.Context, childID string) (MergeResult, error) {
	name, parentID, cw, err := c.childWorkspaceOf(ctx, childID)
	if err != nil {
		return MergeResult{}, err
	}
	p, ok := c.agent(parentID)
	if !ok {
		return MergeResult{}, failf(ErrInvalid, "agent %s has no parent to merge into", name)
	}
	pw, ok := p.OpenWorkspace()
	if !ok {
		return MergeResult{}, failf(ErrInvalid, "the parent %s of %s has no open workspace to merge into", p.Name(), name)
	}
	if w := p.AwayOn(); w != "" {
		// Its files are in the worker's copy until the turn brings them
		// home: a merge into the worktree now would be undone, or undo them.
		return MergeResult{}, failf(ErrWrongState, "the turn of %s runs on worker %s, in a copy of its workspace: merge %s into it after the turn "+
			"(warren workspace merge %s)", p.Name(), w, name, name)
	}
	commit, conflicts, err := c.opts.Git.Merge(ctx, wsOf(p.ID(), pw), wsOf(childID, cw), c.displayName(childID))
	res := MergeResult{Branch: cw.Branch, Commit: commit, Conflicts: conflicts}
	if err != nil && len(conflicts) == 0 {
		return res, fmt.Errorf("merging %s into %s: %w", name, p.Name(), err)
	}
	if _, lerr := p.Append(schema.WorkspaceMerged, schema.WorkspaceMergedData{ChildID: childID, Branch: cw.Branch,
		Commit: commit, Conflicts: conflicts}); lerr != nil {
		return res, lerr
	}
	if len(conflicts) > 0 {
		return res, failf(ErrInvalid, "merging %s into %s stopped on conflicts in %s; the merge was aborted and %s's worktree is as it was",
			name, p.Name(), strings.Join(conflicts, ", "), p.Name())
	}
	return res, nil
}

// childWorkspaceOf is the name, parent and workspace of agent id, live
// or terminated (a child that completed has closed its workspace: its
// branch is what is merged).
func (c *Core) childWorkspaceOf(ctx context.Context, id string) (name, parentID string, w fold.Workspace, err error) {
	if a, ok := c.agent(id); ok {
		w, ok := a.Workspace()
		if !ok {
			return "", "", w, failf(ErrInvalid, "agent %s has no workspace to merge", a.Name())
		}
		parent, _ := c.tree.Parent(id)
		return a.Name(), parent, w, nil
	}
	if !c.agents.Known(id) {
		return "", "", w, notFound(id)
	}
	// Terminated: its log says where its branch is (read from the store:
	// a terminated agent is no longer loaded, so LogPage does not serve it).
	p := fold.New()
	if err := c.ReadEntries(ctx, id, 0, p.Apply); err != nil {
		return "", "", w, err
	}
	if p.Workspace == nil {
		return "", "", w, failf(ErrInvalid, "agent %s had no workspace to merge", p.Name)
	}
	return p.Name, p.ParentID, *p.Workspace, nil
}

// checkGit checks git's version (workspace.Git.CheckVersion) until it
// passes once: then it is not run again on each create (git is not
// swapped under a running daemon; a start checks it again).
func (c *Core) checkGit(ctx context.Context) error {
	if c.gitChecked.Load() {
		return nil
	}
	version, err := c.opts.Git.CheckVersion(ctx)
	if err != nil {
		return err
	}
	c.log.Info("workspaces: git found", "version", version)
	c.gitChecked.Store(true)
	return nil
}
