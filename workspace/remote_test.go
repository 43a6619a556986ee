package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// handOff is a daemon's workspace, the agents' remote (a bare clone of
// its repository) and a worker's copy of the workspace.
type handOff struct {
	w, ww  Workspace
	remote string
}

func newHandOff(t *testing.T, g Git) *handOff {
	t.Helper()
	repo := newRepo(t)
	w := newWorkspace(t, g, repo)
	remote := filepath.Join(filepath.Dir(repo), "agents.git")
	git(t, filepath.Dir(repo), "clone", "-q", "--bare", repo, remote)
	wdir := filepath.Join(t.TempDir(), "worker", "workspaces")
	ww := Workspace{AgentID: w.AgentID, Repo: filepath.Join(wdir, w.AgentID+".git"), Path: filepath.Join(wdir, w.AgentID), Branch: w.Branch}
	return &handOff{w: w, ww: ww, remote: remote}
}

// handOut leases the daemon's worktree (no previous snapshot) to an
// attempt tagged tag, and the worker's copy takes it up.
func (h *handOff) handOut(t *testing.T, g Git, tag string) (lease string) {
	t.Helper()
	ctx := context.Background()
	lease, err := g.Lease(ctx, h.w, h.remote, "", tag)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Adopt(ctx, h.ww, h.remote, lease); err != nil {
		t.Fatal(err)
	}
	return lease
}

// TestWorkspaceMovesThroughTheRemote: the daemon hands its worktree to a
// worker's attempt (Lease), the worker takes it up (Adopt: files, branch,
// what the agent had not committed), the agent works there (a change, a
// new file, a commit on its branch), the worker hands the result back
// (Hand: a snapshot, the branch pushed) and the daemon brings it home
// (Take): its worktree and branch are the worker's, the snapshot chain
// runs through the lease to the start. A worker whose lease was given to
// a later attempt can neither take the workspace up nor hand it back.
func TestWorkspaceMovesThroughTheRemote(t *testing.T) {
	g := Git{}
	ctx := context.Background()
	h := newHandOff(t, g)
	write(t, filepath.Join(h.w.Path, "wip.txt"), "not committed yet\n")
	start, err := g.Snapshot(ctx, h.w, "start", "")
	if err != nil {
		t.Fatal(err)
	}
	lease, err := g.Lease(ctx, h.w, h.remote, start, "attempt 1")
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Adopt(ctx, h.ww, h.remote, lease); err != nil {
		t.Fatal(err)
	}
	if err := g.Adopt(ctx, h.ww, h.remote, lease); err != nil {
		t.Fatalf("adopting again: %v", err)
	}
	if got := read(t, filepath.Join(h.ww.Path, "wip.txt")); got != "not committed yet\n" {
		t.Fatalf("the worker's copy: wip.txt %q", got)
	}
	if err := g.Check(ctx, h.ww); err != nil {
		t.Fatalf("the worker's copy is no worktree on the branch: %v", err)
	}
	// The agent's turn on the worker.
	write(t, filepath.Join(h.ww.Path, "wip.txt"), "changed on the worker\n")
	write(t, filepath.Join(h.ww.Path, "new.txt"), "made on the worker\n")
	write(t, filepath.Join(h.ww.Path, "src", "b.go"), "package a // committed\n")
	git(t, h.ww.Path, "add", "src/b.go")
	git(t, h.ww.Path, "-c", "user.name=agent", "-c", "user.email=a@a", "commit", "-q", "-m", "the agent's commit")
	workerHead := git(t, h.ww.Path, "rev-parse", "HEAD")
	end, err := g.Hand(ctx, h.ww, h.remote, "end", lease)
	if err != nil {
		t.Fatal(err)
	}
	if got := git(t, h.remote, "rev-parse", "refs/heads/"+h.w.Branch); got != workerHead {
		t.Errorf("the remote's branch is %s, want the worker's head %s", got, workerHead)
	}
	if err := g.Take(ctx, h.w, h.remote, end, lease); err != nil {
		t.Fatal(err)
	}
	if err := g.Take(ctx, h.w, h.remote, end, lease); err != nil {
		t.Fatalf("taking again: %v", err)
	}
	for f, want := range map[string]string{"wip.txt": "changed on the worker\n", "new.txt": "made on the worker\n", "src/b.go": "package a // committed\n"} {
		if got := read(t, filepath.Join(h.w.Path, f)); got != want {
			t.Errorf("the daemon's worktree after the take: %s is %q, want %q", f, got, want)
		}
	}
	repo := h.w.Repo
	if got := git(t, repo, "rev-parse", h.w.Branch); got != workerHead {
		t.Errorf("the daemon's branch is %s, want the worker's head %s", got, workerHead)
	}
	if got := git(t, repo, "rev-parse", SnapshotRef(h.w.AgentID), end+"^2", lease+"^2"); got != end+"\n"+lease+"\n"+start {
		t.Errorf("the snapshot chain: %q, want end, lease, start", got)
	}
	// The agent's commit is on the branch and in the index: only what it
	// did not commit shows.
	if st := git(t, h.w.Path, "status", "--porcelain"); st != "?? new.txt\n?? wip.txt" {
		t.Errorf("the daemon's worktree status: %q (the index must follow the branch)", st)
	}

	// A later attempt holds the workspace: the earlier one's worker can
	// neither adopt nor hand back.
	lease2, err := g.Lease(ctx, h.w, h.remote, end, "attempt 2")
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Adopt(ctx, h.ww, h.remote, lease); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("adopting a lease handed on: %v", err)
	}
	write(t, filepath.Join(h.ww.Path, "late.txt"), "late\n")
	if _, err := g.Hand(ctx, h.ww, h.remote, "late end", lease); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("handing back under a lease handed on: %v", err)
	}
	if got := git(t, h.remote, "rev-parse", IncomingRef(h.w.AgentID)); got != lease2 {
		t.Errorf("the remote holds %s, want the later lease %s", got, lease2)
	}
	if err := g.Take(ctx, h.w, h.remote, end, lease); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("taking a snapshot the remote no longer holds: %v", err)
	}
}

// cutGit is a git that fails its call number at, before running it
// ("before") or after it ran ("after"): what the calling process sees
// when it is killed at that call, as the next start finds it.
func cutGit(t *testing.T, at int, mode string) (Git, func() int) {
	t.Helper()
	real, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	counter := filepath.Join(dir, "n")
	script := fmt.Sprintf(`#!/bin/sh
n=$(cat %[1]q 2>/dev/null || echo 0)
n=$((n+1))
echo $n > %[1]q
if [ "$n" = %[2]d ]; then
  if [ %[3]q = after ]; then %[4]q "$@" >/dev/null 2>&1; fi
  exit 137
fi
exec %[4]q "$@"
`, counter, at, mode, real)
	bin := filepath.Join(dir, "git")
	if err := os.WriteFile(bin, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	calls := func() int {
		b, _ := os.ReadFile(counter)
		var n int
		fmt.Sscan(string(b), &n)
		return n
	}
	return Git{Bin: bin}, calls
}

// TestHandOffCutAtEveryGitCall cuts each step of a hand-off at each of
// its git calls, before the call and after it (the call then ran, but
// its caller sees it fail), and goes on as warren does: a failed step
// fails the attempt (a transient failure: the daemon's Lease, the
// worker's take-up and hand-back, and the daemon's bring-home, which puts
// the lease back), and the next attempt starts again from the daemon's
// worktree on a new lease. The agent appends a line to a file in each
// attempt. Every way through ends with that line in the daemon's worktree
// once, and the remote and the daemon's snapshot ref at the snapshot of
// the attempt that succeeded.
func TestHandOffCutAtEveryGitCall(t *testing.T) {
	g := Git{}
	ctx := context.Background()
	for _, step := range []string{"lease", "adopt", "hand", "take"} {
		for _, mode := range []string{"before", "after"} {
			for at := 1; ; at++ {
				h := newHandOff(t, g)
				write(t, filepath.Join(h.w.Path, "notes.md"), "# start\n")
				start, err := g.Snapshot(ctx, h.w, "start", "")
				if err != nil {
					t.Fatal(err)
				}
				cut, calls := cutGit(t, at, mode)
				cutOnce := map[string]bool{step: true}
				use := func(s string) Git {
					if cutOnce[s] {
						delete(cutOnce, s)
						return cut
					}
					return g
				}
				var end string
				failed := 0
				for attempt := 1; end == "" && attempt <= 3; attempt++ {
					lease, err := use("lease").Lease(ctx, h.w, h.remote, start, fmt.Sprintf("attempt %d", attempt))
					if err != nil {
						failed++
						continue
					}
					if err := use("adopt").Adopt(ctx, h.ww, h.remote, lease); err != nil {
						failed++
						continue
					}
					f, err := os.OpenFile(filepath.Join(h.ww.Path, "notes.md"), os.O_APPEND|os.O_WRONLY, 0)
					if err != nil {
						t.Fatalf("%s cut at %d %s: the copy: %v", step, at, mode, err)
					}
					_, _ = f.WriteString("a line from the worker\n")
					f.Close()
					snap, err := use("hand").Hand(ctx, h.ww, h.remote, "end", lease)
					if err != nil {
						failed++
						continue
					}
					if err := use("take").Take(ctx, h.w, h.remote, snap, lease); err != nil {
						failed++
						continue
					}
					end = snap
				}
				what := fmt.Sprintf("%s cut at call %d %s", step, at, mode)
				if end == "" {
					t.Fatalf("%s: no attempt of three succeeded", what)
				}
				if got := read(t, filepath.Join(h.w.Path, "notes.md")); got != "# start\na line from the worker\n" {
					t.Fatalf("%s (%d attempts failed): the daemon's notes.md: %q", what, failed, got)
				}
				if err := g.Check(ctx, h.w); err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				if got := git(t, h.remote, "rev-parse", IncomingRef(h.w.AgentID)); got != end {
					t.Errorf("%s: the remote holds %s, not the snapshot taken (%s)", what, got, end)
				}
				if got := git(t, h.w.Repo, "rev-parse", SnapshotRef(h.w.AgentID)); got != end {
					t.Errorf("%s: the daemon's snapshot ref is %s, not the snapshot taken (%s)", what, got, end)
				}
				if calls() < at {
					break // the step made fewer calls: every one was cut
				}
				if failed > 1 {
					t.Errorf("%s: %d attempts failed, want at most the cut one (some cuts are absorbed)", what, failed)
				}
			}
		}
	}
}

// TestTakeRefusesABranchThatMoved: a merge into the daemon's worktree
// while the attempt ran on the worker (merge_child, run at the daemon) is
// not undone by bringing the attempt home: the take is refused
// (ErrMovedMeanwhile), the worktree keeps the merge, and the next lease
// holds it.
func TestTakeRefusesABranchThatMoved(t *testing.T) {
	g := Git{}
	ctx := context.Background()
	h := newHandOff(t, g)
	lease := h.handOut(t, g, "attempt 1")
	write(t, filepath.Join(h.ww.Path, "worker.txt"), "from the worker\n")
	end, err := g.Hand(ctx, h.ww, h.remote, "end", lease)
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(h.w.Path, "merged.txt"), "merged meanwhile\n")
	git(t, h.w.Path, "add", "merged.txt")
	git(t, h.w.Path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "a merge meanwhile")
	if err := g.Take(ctx, h.w, h.remote, end, lease); !errors.Is(err, ErrMovedMeanwhile) {
		t.Fatalf("taking over a moved branch: %v", err)
	}
	if read(t, filepath.Join(h.w.Path, "merged.txt")) != "merged meanwhile\n" {
		t.Fatal("the merge is gone from the daemon's worktree")
	}
	h.handOut(t, g, "attempt 2")
	if read(t, filepath.Join(h.ww.Path, "merged.txt")) != "merged meanwhile\n" || read(t, filepath.Join(h.ww.Path, "worker.txt")) == "from the worker\n" {
		t.Fatal("the next attempt's copy is not the daemon's worktree with the merge")
	}
}

// TestAdoptForcesACopyOffItsBranch: an agent that left its copy on
// another branch with changes there, in the middle of a rebase, with a
// lock its killed git left, does not wedge the worker: the next take-up
// puts the copy back on the agent's branch, at the lease.
func TestAdoptForcesACopyOffItsBranch(t *testing.T) {
	g := Git{}
	ctx := context.Background()
	h := newHandOff(t, g)
	h.handOut(t, g, "attempt 1")
	git(t, h.ww.Path, "switch", "-q", "-c", "elsewhere")
	write(t, filepath.Join(h.ww.Path, "README.md"), "changed off the branch\n")
	git(t, h.ww.Path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-am", "elsewhere")
	write(t, filepath.Join(h.ww.Path, "README.md"), "and changed again\n")
	// What an agent's git killed in the middle of a rebase leaves.
	admin, err := adminDir(h.ww.Repo, h.ww.Path)
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(admin, "rebase-merge", "head-name"), "refs/heads/elsewhere\n")
	write(t, filepath.Join(admin, "index.lock"), "")
	lease := h.handOut(t, g, "attempt 2")
	if err := g.Check(ctx, h.ww); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(h.ww.Path, "README.md")); got != "hello\n" {
		t.Fatalf("README.md in the copy: %q", got)
	}
	if head, want := git(t, h.ww.Path, "rev-parse", "HEAD"), git(t, h.ww.Repo, "rev-parse", lease+"^1"); head != want {
		t.Fatalf("the copy's branch is at %s, not at the lease's head %s", head, want)
	}
}

// TestForgetDeletesTheIncomingRef: once the daemon forgets a closed
// workspace, the remote holds no incoming ref for the agent, and the
// branch a worker pushed stays; forgetting one the remote never had, or
// again, is no error.
func TestForgetDeletesTheIncomingRef(t *testing.T) {
	g := Git{}
	ctx := context.Background()
	h := newHandOff(t, g)
	lease := h.handOut(t, g, "attempt 1")
	if _, err := g.Hand(ctx, h.ww, h.remote, "end", lease); err != nil {
		t.Fatal(err)
	}
	refs := func() string {
		return git(t, h.remote, "for-each-ref", "--format=%(refname)")
	}
	if !strings.Contains(refs(), IncomingRef(h.w.AgentID)) {
		t.Fatalf("no incoming ref after a hand-out: %s", refs())
	}
	for i := range 2 {
		if err := g.Forget(ctx, h.w, h.remote); err != nil {
			t.Fatalf("forget %d: %v", i+1, err)
		}
		got := refs()
		if strings.Contains(got, IncomingRef(h.w.AgentID)) || !strings.Contains(got, "refs/heads/"+h.w.Branch) {
			t.Fatalf("after forget %d the remote holds %s; want the branch %s and no incoming ref", i+1, got, h.w.Branch)
		}
	}
	other := h.w
	other.AgentID = "never-away"
	if err := g.Forget(ctx, other, h.remote); err != nil {
		t.Fatalf("forgetting an agent the remote never had: %v", err)
	}
	if err := g.Forget(ctx, h.w, filepath.Join(t.TempDir(), "gone.git")); err == nil {
		t.Fatal("forgetting on a remote that is not there said nothing")
	}
}
