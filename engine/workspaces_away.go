package engine

import (
	"context"
	"fmt"

	fold "github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/workspace"
)

// A workspace away: an agent whose provider entry names an agents'
// remote ("worker": {"remote": URL}) may run on a remote worker with its
// workspace. The daemon's worktree stays the workspace between turns:
// every other operation (snapshots at a turn's start, restores, merges,
// closing, repair) runs on it as for a local agent. For each attempt on a
// worker, the daemon hands the worktree as it is to the attempt (a lease
// commit pushed to the remote), the worker's copy takes it up, the agent
// works there, and after an attempt that succeeded the worker records its
// copy as the turn's end snapshot and hands it back on the remote, with a
// lease on the lease; the daemon brings it home into its worktree and
// logs it (workspace.snapshot with the worker). An attempt that failed,
// was cancelled or suspended its run hands back what the agent left too
// (a suspension logs no end snapshot: the turn has not ended), so the
// daemon's worktree holds what a local agent's would. A later lease (a retry on
// another worker) makes an earlier attempt's hand-back fail, and its late
// answer is dropped: an attempt's edits reach the daemon once or never.
// What a lost worker loses is its attempt's edits, which a re-run would
// roll back anyway (package workspace, doc.go).

// awaySpec is what providerSpec gives a session of agent id that may open
// on a worker with its workspace: the agents' remote, and the lease that
// hands the workspace to the worker at the open (made: the workspace of
// an agent being created, not listed yet).
func (c *Core) awaySpec(id, remote string, made *schema.WorkspaceData) *provider.WorkspaceSpec {
	return &provider.WorkspaceSpec{Remote: remote, Lease: func(ctx context.Context) (provider.WorkspaceHand, error) {
		w, last, err := c.workspaceNow(id, made)
		if err != nil {
			return provider.WorkspaceHand{}, err
		}
		lease, err := c.opts.Git.Lease(ctx, w, remote, last, "the open of agent "+id+" on a worker")
		if err != nil {
			return provider.WorkspaceHand{}, err
		}
		return provider.WorkspaceHand{Lease: lease, Branch: w.Branch}, nil
	}}
}

// workspaceNow is agent id's open workspace and its latest snapshot ("":
// none), or made for an agent being created.
func (c *Core) workspaceNow(id string, made *schema.WorkspaceData) (workspace.Workspace, string, error) {
	if a, ok := c.agent(id); ok {
		w, ok := a.OpenWorkspace()
		if !ok {
			return workspace.Workspace{}, "", fmt.Errorf("agent %s has no open workspace to hand to a worker", id)
		}
		return wsOf(id, w), w.Last, nil
	}
	if made == nil {
		return workspace.Workspace{}, "", fmt.Errorf("agent %s has no workspace to hand to a worker", id)
	}
	return wsOf(id, fold.Workspace{Repo: made.Repo, Path: made.Path, Branch: made.Branch, Base: made.Base}), "", nil
}

// handOut hands a's workspace to one attempt of turn t on a worker,
// through the remote its session was opened with: the attempt's
// TurnIO.Workspace.
func (c *Core) handOut(ctx context.Context, a *agent, t turnPlan, attempt int, remote string) (*provider.WorkspaceHand, error) {
	w, last, err := c.workspaceNow(a.ID(), nil)
	if err != nil {
		return nil, err
	}
	lease, err := c.opts.Git.Lease(ctx, w, remote, last, fmt.Sprintf("attempt %d of run %s turn %d", attempt, t.RunID, t.Turn))
	if err != nil {
		return nil, err
	}
	return &provider.WorkspaceHand{Lease: lease, Branch: w.Branch, Message: snapshotMessage(schema.SnapshotEnd, t.RunID, t.Turn)}, nil
}

// bringHome brings the end snapshot an attempt on worker handed back on
// remote into a's worktree; the turn's end logs it (snapshotTurn). It is
// not cut short by the turn's end (a cancel): a failed one leaves the
// worktree as the attempt found it (workspace.Git.Take).
func (c *Core) bringHome(ctx context.Context, a *agent, hand *provider.WorkspaceHand, worker, remote string) (handed, error) {
	if hand.Snapshot == "" {
		return handed{}, fmt.Errorf("worker %s answered the turn of %s without handing its workspace back", worker, a.Name())
	}
	w, _, err := c.workspaceNow(a.ID(), nil)
	if err != nil {
		return handed{}, err
	}
	if err := c.opts.Git.Take(context.WithoutCancel(ctx), w, remote, hand.Snapshot, hand.Lease); err != nil {
		return handed{}, fmt.Errorf("bringing the workspace of %s home from worker %s: %w", a.Name(), worker, err)
	}
	return handed{Commit: hand.Snapshot, Worker: worker}, nil
}

// cameHome brings home what an attempt on worker handed back (its end
// snapshot) and returns the attempt's error: sendErr, or, after an
// attempt that succeeded, the failure to bring its edits home. Those
// must come home before the turn ends; if they cannot, the turn is tried
// again from the daemon's worktree, on a session opened again from the
// log (sess given up: it has done the turn, and remembers edits the
// worktree does not have). After an attempt that failed or was cancelled,
// what the agent left comes home as a local agent's stays in its
// worktree (a re-run or the next attempt starts from it); when it
// cannot, the worktree stays as the attempt found it.
func (c *Core) cameHome(ctx context.Context, a *agent, sess *turnSession, home *handed, hand *provider.WorkspaceHand, worker, remote string, sendErr error) error {
	h, err := c.bringHome(ctx, a, hand, worker, remote)
	switch {
	case err == nil:
		*home = h
		return sendErr
	case sendErr == nil:
		sess.End(true)
		*sess = turnSession{}
		return provider.Transient(err, 0)
	default:
		c.log.Warn("what an attempt that did not succeed left on its worker did not come home; the workspace stays as the attempt found it",
			"agent", a.ID(), "worker", worker, "err", err)
		return sendErr
	}
}

// handed is a turn's end snapshot that a worker took and the daemon
// brought home ("" Commit: none).
type handed struct {
	Commit, Worker string
}
