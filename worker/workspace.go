package worker

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/warren-dev/warren/provider/remote"
	"github.com/warren-dev/warren/workspace"
)

// away is the worker's copy of an agent's workspace: a bare repository
// of the worker's, <dir>/workspaces/<agent id>.git, and its linked
// worktree <dir>/workspaces/<agent id>, where the agent runs. It takes up
// what the daemon hands each attempt and hands the attempt's end back,
// through the agents' remote (package workspace, "Workspaces on
// workers"). The repository is outside the worktree, so a sandboxed
// agent writes its worktree and commits on its branch but cannot
// configure what the worker's git runs.
type away struct {
	git    workspace.Git
	remote string
	ws     workspace.Workspace
}

// openAway takes up the workspace an open hands over, before the agent's
// process starts in it.
func (w *Worker) openAway(ctx context.Context, agentID string, h *remote.Hand) (*away, error) {
	l := w.copies.of(agentID)
	l.Lock()
	defer l.Unlock()
	if err := checkHand(h); err != nil {
		return nil, err
	}
	if _, err := w.o.Git.CheckVersion(ctx); err != nil {
		return nil, fmt.Errorf("worker %s cannot keep an agent's workspace: %w", w.o.ID, err)
	}
	dir := filepath.Join(w.o.Dir, "workspaces")
	aw := &away{git: w.o.Git, remote: h.Remote, ws: workspace.Workspace{AgentID: agentID,
		Repo: filepath.Join(dir, agentID+".git"), Path: filepath.Join(dir, agentID), Branch: h.Branch}}
	if err := aw.git.Adopt(ctx, aw.ws, aw.remote, h.Lease); err != nil {
		return nil, err
	}
	return aw, nil
}

// take takes up the lease an attempt was handed, before its turn runs.
func (aw *away) take(ctx context.Context, h *remote.Hand) error {
	if err := checkHand(h); err != nil {
		return err
	}
	if h.Remote != aw.remote || h.Branch != aw.ws.Branch {
		return fmt.Errorf("the attempt names remote %q and branch %q; the session was opened with %q and %q", h.Remote, h.Branch, aw.remote, aw.ws.Branch)
	}
	return aw.git.Adopt(ctx, aw.ws, aw.remote, h.Lease)
}

// give hands the copy back after an attempt that succeeded: its end
// snapshot.
func (aw *away) give(ctx context.Context, h *remote.Hand) (string, error) {
	return aw.git.Hand(ctx, aw.ws, aw.remote, h.Message, h.Lease)
}

// copyLocks holds one lock per agent: an open's take-up and an attempt's
// take-up, turn and hand-back are one at a time on the agent's copy.
type copyLocks struct {
	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

func (c *copyLocks) of(agent string) *sync.Mutex {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.locks == nil {
		c.locks = map[string]*sync.Mutex{}
	}
	l, ok := c.locks[agent]
	if !ok {
		l = &sync.Mutex{}
		c.locks[agent] = l
	}
	return l
}

var (
	leasePattern  = regexp.MustCompile(`^[0-9a-f]{40}([0-9a-f]{24})?$`)
	branchPattern = regexp.MustCompile(`^warren/[A-Za-z0-9_][A-Za-z0-9._-]{0,200}$`)
)

// checkHand refuses a hand whose parts git would take for something
// else: an option for a remote, a ref that is not an agent's branch, a
// lease that is not a commit id.
func checkHand(h *remote.Hand) error {
	if err := workspace.CheckRemote(h.Remote); err != nil {
		return err
	}
	if !leasePattern.MatchString(h.Lease) {
		return fmt.Errorf("the workspace's lease %q is not a commit id", h.Lease)
	}
	if !branchPattern.MatchString(h.Branch) || strings.Contains(h.Branch, "..") || strings.HasSuffix(h.Branch, ".lock") {
		return fmt.Errorf("the workspace's branch %q is not an agent's branch (warren/...)", h.Branch)
	}
	if len(h.Message) > 1024 || strings.ContainsRune(h.Message, 0) {
		return fmt.Errorf("the snapshot message is over 1024 bytes or holds a NUL")
	}
	return nil
}
