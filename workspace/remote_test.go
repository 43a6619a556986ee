package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	if err := g.Take(ctx, h.w, h.remote, end); err != nil {
		t.Fatal(err)
	}
	if err := g.Take(ctx, h.w, h.remote, end); err != nil {
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
	if err := g.Take(ctx, h.w, h.remote, end); !errors.Is(err, ErrLeaseLost) {
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

// TestHandOffCutAtEveryGitCall cuts each side of a hand-off at each git
// call, before the call and after it, and goes on as warren does: the
// daemon's Lease and Take and the worker's Adopt are done again; a cut
// Hand fails the attempt, and the daemon hands the workspace to a new
// one. Every way through ends with the worker's work in the daemon's
// worktree, once, and the remote never holds a snapshot of an attempt
// whose lease was handed on.
func TestHandOffCutAtEveryGitCall(t *testing.T) {
	g := Git{}
	ctx := context.Background()
	for _, step := range []string{"lease", "adopt", "hand", "take"} {
		for _, mode := range []string{"before", "after"} {
			for at := 1; ; at++ {
				h := newHandOff(t, g)
				start, err := g.Snapshot(ctx, h.w, "start", "")
				if err != nil {
					t.Fatal(err)
				}
				cut, calls := cutGit(t, at, mode)
				use := func(s string) Git {
					if s == step {
						return cut
					}
					return g
				}
				lease, err := use("lease").Lease(ctx, h.w, h.remote, start, "attempt 1")
				if err != nil {
					lease, err = g.Lease(ctx, h.w, h.remote, start, "attempt 1 again")
				}
				if err != nil {
					t.Fatalf("%s cut at %d %s: the lease again: %v", step, at, mode, err)
				}
				if err := use("adopt").Adopt(ctx, h.ww, h.remote, lease); err != nil {
					if err := g.Adopt(ctx, h.ww, h.remote, lease); err != nil {
						t.Fatalf("%s cut at %d %s: adopting again: %v", step, at, mode, err)
					}
				}
				write(t, filepath.Join(h.ww.Path, "notes.md"), "one line from the worker\n")
				end, err := use("hand").Hand(ctx, h.ww, h.remote, "end", lease)
				if err != nil {
					// The attempt failed: a new one on a fresh lease.
					if lease, err = g.Lease(ctx, h.w, h.remote, start, "attempt 2"); err != nil {
						t.Fatal(err)
					}
					if err := g.Adopt(ctx, h.ww, h.remote, lease); err != nil {
						t.Fatalf("%s cut at %d %s: adopting the new lease: %v", step, at, mode, err)
					}
					if got := read(t, filepath.Join(h.ww.Path, "notes.md")); got != "<open "+filepath.Join(h.ww.Path, "notes.md")+": no such file or directory>" {
						t.Fatalf("%s cut at %d %s: the new attempt starts with the failed one's notes.md: %q", step, at, mode, got)
					}
					write(t, filepath.Join(h.ww.Path, "notes.md"), "one line from the worker\n")
					if end, err = g.Hand(ctx, h.ww, h.remote, "end", lease); err != nil {
						t.Fatalf("%s cut at %d %s: the new attempt's hand: %v", step, at, mode, err)
					}
				}
				if err := use("take").Take(ctx, h.w, h.remote, end); err != nil {
					if err := g.Take(ctx, h.w, h.remote, end); err != nil {
						t.Fatalf("%s cut at %d %s: taking again: %v", step, at, mode, err)
					}
				}
				if got := read(t, filepath.Join(h.w.Path, "notes.md")); got != "one line from the worker\n" {
					t.Fatalf("%s cut at %d %s: the daemon's notes.md: %q", step, at, mode, got)
				}
				if err := g.Check(ctx, h.w); err != nil {
					t.Fatalf("%s cut at %d %s: %v", step, at, mode, err)
				}
				if calls() < at {
					break // the step made fewer calls: every one was cut
				}
			}
		}
	}
}
