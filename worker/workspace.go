package worker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

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
// process starts in it. The caller holds the agent's copy
// (copies.hold) until the session stops.
func (w *Worker) openAway(ctx context.Context, agentID string, h *remote.Hand) (*away, error) {
	if err := checkHand(h); err != nil {
		return nil, err
	}
	if _, err := w.o.Git.CheckVersion(ctx); err != nil {
		return nil, fmt.Errorf("worker %s cannot keep an agent's workspace: %w", w.o.ID, err)
	}
	// A new copy is the time to make room: the copies of agents this
	// worker holds no session of are kept only up to idleCopies.
	w.copies.sweep(idleCopies, agentID, w.log)
	l := w.copies.of(agentID)
	l.Lock()
	defer l.Unlock()
	aw := &away{git: w.o.Git, remote: h.Remote, ws: w.copies.workspace(agentID, h.Branch)}
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

// idleCopies bounds the copies a worker keeps of workspaces of agents it
// holds no session of. Such a copy only saves the next open of that agent
// here a fetch of the whole history: the daemon's worktree is the
// workspace between turns.
const idleCopies = 8

// copies are the worker's copies of workspaces, in dir: one lock per
// agent (an open's take-up and an attempt's take-up, turn and hand-back
// are one at a time on the agent's copy), and which ones are in use.
type copies struct {
	dir   string
	mu    sync.Mutex
	locks map[string]*sync.Mutex
	// held counts the sessions of each agent whose copy is in use, an
	// open under way included; let is when an agent's last one let go.
	held map[string]int
	let  map[string]time.Time
}

// workspace is agent's copy: a bare repository <dir>/<agent>.git and
// its linked worktree <dir>/<agent>.
func (c *copies) workspace(agent, branch string) workspace.Workspace {
	return workspace.Workspace{AgentID: agent, Repo: filepath.Join(c.dir, agent+".git"), Path: filepath.Join(c.dir, agent), Branch: branch}
}

func (c *copies) of(agent string) *sync.Mutex {
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

// hold marks agent's copy in use, before its open starts: a sweep leaves
// it until release.
func (c *copies) hold(agent string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held == nil {
		c.held, c.let = map[string]int{}, map[string]time.Time{}
	}
	c.held[agent]++
}

// release lets go of one hold of agent's copy.
func (c *copies) release(agent string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held[agent]--; c.held[agent] <= 0 {
		delete(c.held, agent)
		c.let[agent] = time.Now()
	}
}

// sweep removes the copies of agents not held beyond the keep let go
// last (never except's: an open is about to take it up). A copy this
// run never held counts as let go when its repository last fetched.
func (c *copies) sweep(keep int, except string, log hclog.Logger) {
	entries, err := os.ReadDir(c.dir)
	if err != nil {
		return // none yet
	}
	type idle struct {
		agent string
		at    time.Time
	}
	var all []idle
	c.mu.Lock()
	for _, e := range entries {
		agent, ok := strings.CutSuffix(e.Name(), ".git")
		if !ok || remote.CheckID(agent) != nil || agent == except || c.held[agent] > 0 {
			continue
		}
		at, ok := c.let[agent]
		if !ok {
			at = lastFetch(filepath.Join(c.dir, e.Name()))
		}
		all = append(all, idle{agent, at})
	}
	c.mu.Unlock()
	if len(all) <= keep {
		return
	}
	slices.SortFunc(all, func(a, b idle) int { return b.at.Compare(a.at) })
	for _, i := range all[keep:] {
		if err := c.remove(i.agent); err != nil {
			log.Warn("removing an idle copy of a workspace", "agent", i.agent, "error", err)
		}
	}
}

// remove removes agent's copy, unless an open holds it by now: its
// worktree first, then its repository (a repository left by a cut is
// the next sweep's; a copy whose worktree is gone is repaired by an
// open's take-up).
func (c *copies) remove(agent string) error {
	l := c.of(agent)
	if !l.TryLock() {
		return nil // in use
	}
	defer l.Unlock()
	c.mu.Lock()
	held := c.held[agent] > 0
	c.mu.Unlock()
	if held {
		return nil
	}
	ws := c.workspace(agent, "")
	if err := os.RemoveAll(ws.Path); err != nil {
		return err
	}
	if err := os.RemoveAll(ws.Repo); err != nil {
		return err
	}
	c.mu.Lock()
	delete(c.let, agent)
	c.mu.Unlock()
	return nil
}

// lastFetch is when the repository at repo last fetched (its FETCH_HEAD),
// else when it changed.
func lastFetch(repo string) time.Time {
	for _, p := range []string{filepath.Join(repo, "FETCH_HEAD"), repo} {
		if fi, err := os.Stat(p); err == nil {
			return fi.ModTime()
		}
	}
	return time.Time{}
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
