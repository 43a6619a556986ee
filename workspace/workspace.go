package workspace

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// Workspace is one agent's worktree, as its log records it
// (workspace.created).
type Workspace struct {
	AgentID string
	// Repo is the top-level directory of the repository the worktree is
	// linked to (absolute).
	Repo string
	// Path is the worktree's directory (absolute).
	Path string
	// Branch is the worktree's branch (without refs/heads/).
	Branch string
	// Base is the commit the branch was made at.
	Base string
}

// SnapshotRef is the ref that keeps agent id's snapshots.
func SnapshotRef(agentID string) string { return "refs/warren/snapshots/" + agentID }

var unsafeBranch = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// BranchName is the branch of the agent at agentPath (its slash path)
// with id: warren/<path with "/" as "-">-<first 8 hex of the id>.
func BranchName(agentPath, agentID string) string {
	p := unsafeBranch.ReplaceAllString(strings.ReplaceAll(agentPath, "/", "-"), "_")
	p = strings.Trim(p, ".-")
	if p == "" {
		p = "agent"
	}
	id := agentID
	if len(id) > 8 {
		id = id[:8]
	}
	return "warren/" + p + "-" + id
}

// Resolve finds the repository that contains dir (its top-level
// directory) and the commit base names ("" = its HEAD).
func (g Git) Resolve(ctx context.Context, dir, base string) (repo, commit string, err error) {
	out, err := g.run(ctx, dir, nil, "rev-parse", "--show-toplevel")
	if err != nil {
		return "", "", fmt.Errorf("%s is not inside a git repository (a workspace is a worktree of one): %w", dir, err)
	}
	repo = line(out)
	if base == "" {
		base = "HEAD"
	}
	out, err = g.run(ctx, repo, nil, "rev-parse", "--verify", "--end-of-options", base+"^{commit}")
	if err != nil {
		return "", "", fmt.Errorf("%q names no commit of %s: %w", base, repo, err)
	}
	return repo, line(out), nil
}

// Create makes w's worktree (`git worktree add -b`), or adopts the one a
// crash left (linked to the repository, on the branch: its files are
// checked out again; the agent never ran in it), or makes it from the
// branch when only the branch exists; then it copies the ignored files
// copies lists into it (CopyFiles).
func (g Git) Create(ctx context.Context, w Workspace, copies []string) error {
	switch err := g.Check(ctx, w); {
	case err == nil:
		env, err := g.pin(ctx, w)
		if err != nil {
			return err
		}
		if _, err := g.run(ctx, w.Path, env, "reset", "--hard", "-q"); err != nil {
			return err
		}
	case errors.Is(err, errMissing) && g.branchExists(ctx, w):
		if _, err := g.run(ctx, w.Repo, nil, "worktree", "prune"); err != nil {
			return err
		}
		if _, err := g.run(ctx, w.Repo, nil, "worktree", "add", "--end-of-options", w.Path, w.Branch); err != nil {
			return err
		}
	case errors.Is(err, errMissing):
		if err := os.MkdirAll(filepath.Dir(w.Path), 0o700); err != nil {
			return err
		}
		if _, err := g.run(ctx, w.Repo, nil, "worktree", "add", "-b", w.Branch, "--end-of-options", w.Path, w.Base); err != nil {
			return err
		}
	default:
		return fmt.Errorf("creating the workspace %s: %w", w.Path, err)
	}
	return CopyFiles(w.Repo, w.Path, copies)
}

// branchExists reports whether w's branch exists in its repository.
func (g Git) branchExists(ctx context.Context, w Workspace) bool {
	_, err := g.run(ctx, w.Repo, nil, "rev-parse", "--verify", "-q", "refs/heads/"+w.Branch)
	return err == nil
}

// Errors of Check: what is wrong with a worktree.
var (
	errMissing     = errors.New("the worktree directory is missing")
	errNotWorktree = errors.New("the directory is not a worktree of the repository")
	errOffBranch   = errors.New("the worktree is not on its branch")
)

// Check compares w's worktree with what its log says: the directory
// exists, is a linked worktree of the repository, and is on the branch.
// The error wraps what is wrong.
func (g Git) Check(ctx context.Context, w Workspace) error {
	fi, err := os.Lstat(w.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: %s", errMissing, w.Path)
	case err != nil:
		return err
	case !fi.IsDir():
		return fmt.Errorf("%w: %s is not a directory", errNotWorktree, w.Path)
	}
	l, err := g.locate(ctx, w)
	if err != nil {
		return err
	}
	// The worktree's .git file is read as data, never followed: it must
	// name the directory the repository keeps for this worktree.
	b, err := readSmall(filepath.Join(w.Path, ".git"))
	got, _ := strings.CutPrefix(strings.TrimSpace(b), "gitdir: ")
	if err != nil || !samePath(relativeTo(w.Path, got), l.admin) {
		return fmt.Errorf("%w: %s (its .git names %q, the repository's worktree directory is %q)", errNotWorktree, w.Path, got, l.admin)
	}
	head, err := g.run(ctx, w.Path, l.env(w.Path), "symbolic-ref", "-q", "HEAD")
	if err != nil {
		return fmt.Errorf("%w: %s has a detached HEAD, not refs/heads/%s", errOffBranch, w.Path, w.Branch)
	}
	if line(head) != "refs/heads/"+w.Branch {
		return fmt.Errorf("%w: %s is on %s, not refs/heads/%s", errOffBranch, w.Path, line(head), w.Branch)
	}
	return nil
}

// commonDir is the absolute git common directory of the repository or
// worktree at dir.
func (g Git) commonDir(ctx context.Context, dir string) (string, error) {
	out, err := g.run(ctx, dir, nil, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil {
		return "", err
	}
	return filepath.Clean(line(out)), nil
}

// Repair makes w's worktree agree with its log again, from the branch:
// a missing directory is made again; a directory that is no worktree of
// the repository is moved aside (never deleted) and the worktree made
// again; a branch renamed inside the worktree gets its name back; a
// detached or switched HEAD is put back on the branch. It says what it
// did ("" when nothing was wrong); an error says why it could not and
// what would fix it.
func (g Git) Repair(ctx context.Context, w Workspace, now time.Time) (what string, err error) {
	prob := g.Check(ctx, w)
	switch {
	case prob == nil:
		return "", nil
	case errors.Is(prob, errMissing):
		if err := g.fromBranch(ctx, w); err != nil {
			return "", err
		}
		return "the directory was missing: made again from branch " + w.Branch, nil
	case errors.Is(prob, errNotWorktree):
		aside := fmt.Sprintf("%s.moved-%s", w.Path, now.UTC().Format("20060102T150405Z"))
		if err := os.Rename(w.Path, aside); err != nil {
			return "", fmt.Errorf("moving %s aside (%v): %w", w.Path, prob, err)
		}
		if err := g.fromBranch(ctx, w); err != nil {
			return "", err
		}
		return fmt.Sprintf("%v; moved it to %s and made the worktree again from branch %s", prob, aside, w.Branch), nil
	case errors.Is(prob, errOffBranch):
		return g.backOnBranch(ctx, w, prob)
	}
	return "", prob
}

// fromBranch makes w's worktree again from its branch.
func (g Git) fromBranch(ctx context.Context, w Workspace) error {
	if !g.branchExists(ctx, w) {
		return fmt.Errorf("the worktree %s cannot be made again: its branch %s is gone from %s; make it again (git -C %s branch %s %s) and restart the daemon",
			w.Path, w.Branch, w.Repo, w.Repo, w.Branch, SnapshotRef(w.AgentID))
	}
	if _, err := g.run(ctx, w.Repo, nil, "worktree", "prune"); err != nil {
		return err
	}
	_, err := g.run(ctx, w.Repo, nil, "worktree", "add", "--end-of-options", w.Path, w.Branch)
	return err
}

// backOnBranch puts w's worktree back on its branch: a branch renamed
// inside it gets its name back; otherwise HEAD is switched to the branch
// (which git refuses when that would lose changes: then the error says
// so).
func (g Git) backOnBranch(ctx context.Context, w Workspace, prob error) (string, error) {
	env, err := g.pin(ctx, w)
	if err != nil {
		return "", err
	}
	head, herr := g.run(ctx, w.Path, env, "symbolic-ref", "-q", "--short", "HEAD")
	if herr == nil && !g.branchExists(ctx, w) {
		cur := line(head)
		if _, err := g.run(ctx, w.Path, env, "branch", "-m", "--end-of-options", cur, w.Branch); err != nil {
			return "", err
		}
		return fmt.Sprintf("%v; renamed branch %s back to %s", prob, cur, w.Branch), nil
	}
	if !g.branchExists(ctx, w) {
		if _, err := g.run(ctx, w.Path, env, "switch", "-c", w.Branch); err != nil {
			return "", err
		}
		return fmt.Sprintf("%v; made branch %s at its HEAD", prob, w.Branch), nil
	}
	if _, err := g.run(ctx, w.Path, env, "switch", w.Branch); err != nil {
		return "", fmt.Errorf("%v, and switching it back failed (commit or stash its changes: git -C %s stash, then restart the daemon): %w",
			prob, w.Path, err)
	}
	return fmt.Sprintf("%v; switched it back to %s", prob, w.Branch), nil
}

// common is the common git directory of w's repository, found from the
// repository (never from the worktree): <repo>/.git when that is a
// directory, else what git says.
func (g Git) common(ctx context.Context, w Workspace) (string, error) {
	common := filepath.Join(w.Repo, ".git")
	if fi, err := os.Lstat(common); err == nil && fi.IsDir() {
		return common, nil
	}
	return g.commonDir(ctx, w.Repo)
}

// Snapshot records w's whole state (every tracked and untracked file that
// is not ignored) as a commit on SnapshotRef and returns it; git made it
// durable (core.fsync) when it returns. Its first parent is the branch
// head (a restore puts that back too, and a child branched from it shares
// the branch's history, so its work merges back); its second is prev, the
// previous snapshot ("" for none), so that the chain keeps every snapshot
// from git's garbage collection. The agent's branch, HEAD and index are
// not touched. Four git calls.
func (g Git) Snapshot(ctx context.Context, w Workspace, message, prev string) (string, error) {
	commit, pin, err := g.commitState(ctx, w, message, prev)
	if err != nil {
		return "", err
	}
	if _, err := g.run(ctx, w.Path, pin, "update-ref", "-m", message, SnapshotRef(w.AgentID), commit); err != nil {
		return "", err
	}
	return commit, nil
}

// commitState makes a commit of w's whole state, with message, whose
// parents are the branch head and prev ("" for none), and returns it with
// the environment that pins w's calls (pin). Three git calls.
func (g Git) commitState(ctx context.Context, w Workspace, message, prev string) (commit string, pin []string, err error) {
	l, err := g.locate(ctx, w)
	if err != nil {
		return "", nil, err
	}
	pin = l.env(w.Path)
	idx, err := l.index(w.AgentID)
	if err != nil {
		return "", nil, err
	}
	env := append([]string{"GIT_INDEX_FILE=" + idx}, pin...)
	if _, err := g.run(ctx, w.Path, env, "add", "-A", "--", "."); err != nil {
		return "", nil, err
	}
	tree, err := g.run(ctx, w.Path, env, "write-tree")
	if err != nil {
		return "", nil, err
	}
	args := []string{"commit-tree", line(tree), "-m", message, "-p", "HEAD"}
	if prev != "" {
		args = append(args, "-p", prev)
	}
	out, err := g.run(ctx, w.Path, pin, args...)
	if err != nil {
		return "", nil, err
	}
	return line(out), pin, nil
}

// InterruptedRef keeps the branch head an interrupted attempt left when a
// restore moves the branch back (its commits are not lost).
func InterruptedRef(agentID string) string { return "refs/warren/interrupted/" + agentID }

// Restore puts snapshot commit back in w's worktree: the branch goes back
// to the head it had then, the snapshot's first parent (the head it
// leaves is kept under InterruptedRef), changed files are rewritten,
// files created since are removed, ignored files are left alone, and the
// index follows the head. It is idempotent.
func (g Git) Restore(ctx context.Context, w Workspace, commit string) error {
	l, err := g.locate(ctx, w)
	if err != nil {
		return err
	}
	pin := l.env(w.Path)
	heads, err := g.run(ctx, w.Path, pin, "rev-parse", "HEAD", commit+"^1")
	if err != nil {
		return err
	}
	cur, want, _ := strings.Cut(strings.TrimSpace(heads), "\n")
	if want = strings.TrimSpace(want); want != "" && cur != want {
		// The branch moves only from where it was read: a move meanwhile
		// (a merge into it) fails the restore instead of being undone.
		moves := fmt.Sprintf("update %s %s\nupdate refs/heads/%s %s %s\n", InterruptedRef(w.AgentID), cur, w.Branch, want, cur)
		if _, err := g.runWith(ctx, w.Path, pin, moves, "update-ref", "-m", "warren: back to the snapshot "+commit, "--stdin"); err != nil {
			return err
		}
	}
	idx, err := l.index(w.AgentID)
	if err != nil {
		return err
	}
	env := append([]string{"GIT_INDEX_FILE=" + idx}, pin...)
	// The private index learns what is there now, so that git knows
	// which files to remove; then the snapshot is read into it, and the
	// worktree follows.
	if _, err := g.run(ctx, w.Path, env, "add", "-A", "--", "."); err != nil {
		return err
	}
	if _, err = g.run(ctx, w.Path, env, "read-tree", "-u", "--reset", commit+"^{tree}"); err != nil {
		return err
	}
	_, err = g.run(ctx, w.Path, pin, "reset", "-q")
	return err
}

// commitLeftovers commits what is not committed in w's worktree to its
// branch, with message; false when there was nothing.
func (g Git) commitLeftovers(ctx context.Context, w Workspace, message string) (bool, error) {
	env, err := g.pin(ctx, w)
	if err != nil {
		return false, err
	}
	if _, err := g.run(ctx, w.Path, env, "add", "-A", "--", "."); err != nil {
		return false, err
	}
	if _, err := g.run(ctx, w.Path, env, "diff", "--cached", "--quiet"); err == nil {
		return false, nil
	}
	_, err = g.run(ctx, w.Path, env, "commit", "-q", "--no-verify", "-m", message)
	return err == nil, err
}

// Close commits what is left in w's worktree to its branch ("warren: work
// left by <agentPath>"), removes the worktree directory and keeps the
// branch, whose head it returns. A worktree whose directory is gone
// already is pruned.
func (g Git) Close(ctx context.Context, w Workspace, agentPath string) (head string, err error) {
	if _, err := os.Lstat(w.Path); err == nil {
		if _, err := g.Repair(ctx, w, time.Now()); err != nil {
			return "", err
		}
		if _, err := g.commitLeftovers(ctx, w, "warren: work left by "+agentPath); err != nil {
			return "", err
		}
		if _, err := g.run(ctx, w.Repo, nil, "worktree", "remove", "--force", "--end-of-options", w.Path); err != nil {
			return "", err
		}
	} else if _, err := g.run(ctx, w.Repo, nil, "worktree", "prune"); err != nil {
		return "", err
	}
	out, err := g.run(ctx, w.Repo, nil, "rev-parse", "--verify", "refs/heads/"+w.Branch)
	if err != nil {
		return "", err
	}
	return line(out), nil
}

// ErrConflict marks a merge that stopped on conflicts (aborted).
var ErrConflict = errors.New("the merge has conflicts")

// Merge commits what is left in child's worktree to its branch, then
// merges that branch into parent's worktree (--no-ff). On conflicts it
// aborts, leaves the parent's worktree as it was, and returns the
// conflicting paths with an error wrapping ErrConflict.
func (g Git) Merge(ctx context.Context, parent, child Workspace, childPath string) (commit string, conflicts []string, err error) {
	if _, err := os.Lstat(child.Path); err == nil {
		if _, err := g.commitLeftovers(ctx, child, "warren: work of "+childPath); err != nil {
			return "", nil, err
		}
	}
	// The parent's own uncommitted work is committed first: a merge into
	// a dirty worktree would refuse (or mix) it.
	if _, err := g.commitLeftovers(ctx, parent, "warren: work before merging "+childPath); err != nil {
		return "", nil, err
	}
	env, err := g.pin(ctx, parent)
	if err != nil {
		return "", nil, err
	}
	_, merr := g.run(ctx, parent.Path, env, "merge", "--no-ff", "--no-edit", "-m", "warren: merge "+childPath+" ("+child.Branch+")",
		"--end-of-options", child.Branch)
	if merr != nil {
		out, _ := g.run(ctx, parent.Path, env, "diff", "--name-only", "--diff-filter=U")
		for _, p := range strings.Split(strings.TrimSpace(out), "\n") {
			if p != "" {
				conflicts = append(conflicts, p)
			}
		}
		if _, err := g.run(ctx, parent.Path, env, "rev-parse", "-q", "--verify", "MERGE_HEAD"); err == nil {
			if _, err := g.run(ctx, parent.Path, env, "merge", "--abort"); err != nil {
				return "", conflicts, fmt.Errorf("aborting the merge of %s: %w (after %v)", child.Branch, err, merr)
			}
		}
		if len(conflicts) > 0 {
			return "", conflicts, fmt.Errorf("%w: merging %s into %s: %s", ErrConflict, child.Branch, parent.Branch, strings.Join(conflicts, ", "))
		}
		return "", nil, merr
	}
	out, err := g.run(ctx, parent.Path, env, "rev-parse", "HEAD")
	if err != nil {
		return "", nil, err
	}
	return line(out), nil, nil
}

// Changed lists the paths that differ between commits from and to of w's
// repository (from "" = none: every path of to).
func (g Git) Changed(ctx context.Context, w Workspace, from, to string) ([]string, error) {
	args := []string{"diff", "--name-only", "--no-renames", from, to}
	if from == "" {
		args = []string{"ls-tree", "-r", "--name-only", to}
	}
	out, err := g.run(ctx, w.Repo, nil, args...)
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, p := range strings.Split(strings.TrimSpace(out), "\n") {
		if p != "" {
			paths = append(paths, p)
		}
	}
	return paths, nil
}

// Diff is the patch between commits from and to of w's repository.
func (g Git) Diff(ctx context.Context, w Workspace, from, to string) (string, error) {
	return g.run(ctx, w.Repo, nil, "diff", "--no-color", from, to)
}

// Discard removes a worktree Create just made for an agent that was
// never created (its creation failed after git made it): the directory
// and the branch, which hold nothing of any agent's work. It is the only
// call here that deletes a branch; the engine makes it only then.
func (g Git) Discard(ctx context.Context, w Workspace) error {
	if _, err := os.Lstat(w.Path); err == nil {
		if _, err := g.run(ctx, w.Repo, nil, "worktree", "remove", "--force", "--end-of-options", w.Path); err != nil {
			return err
		}
	}
	if g.branchExists(ctx, w) {
		if _, err := g.run(ctx, w.Repo, nil, "branch", "-D", "--end-of-options", w.Branch); err != nil {
			return err
		}
	}
	_, _ = g.run(ctx, w.Repo, nil, "update-ref", "-d", SnapshotRef(w.AgentID))
	return nil
}
