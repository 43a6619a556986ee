package workspace

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// IncomingRef is the ref of the agents' remote through which agent id's
// workspace moves between the daemon and the worker running one attempt
// of its turn (doc.go, "Workspaces on workers").
func IncomingRef(agentID string) string { return "refs/warren/incoming/" + agentID }

// CheckRemote refuses an agents' remote that git could take for an
// option, or that holds a space or a control character.
func CheckRemote(remote string) error {
	if remote == "" || len(remote) > 1024 || strings.HasPrefix(remote, "-") ||
		strings.ContainsFunc(remote, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return fmt.Errorf("the agents' remote %q must be a git URL or an absolute path the daemon and every worker reach "+
			"(such as \"ssh://git@host/team/agents.git\" or \"/srv/git/agents.git\")", remote)
	}
	return nil
}

// nonce is 64 random bits in hex: a lease commit's message holds one, so
// that no two leases are the same commit.
func nonce() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// leaseRef is where a worker's repository keeps the lease it fetched.
func leaseRef(agentID string) string { return "refs/warren/lease/" + agentID }

// ErrLeaseLost marks an attempt whose hand was taken back: the remote's
// IncomingRef no longer holds the lease it was given (the daemon handed
// the workspace to a later attempt).
var ErrLeaseLost = errors.New("the workspace was handed to another attempt")

// Lease hands w's worktree, as it is now, to one attempt on a worker: a
// commit of its whole state (as Snapshot records it), whose parents are
// the branch head and last (the latest snapshot, so that the chain keeps
// every snapshot), with a message naming tag, pushed to remote's
// IncomingRef. The push is forced: the daemon, the log's one writer,
// decides who holds the workspace. It returns the lease.
func (g Git) Lease(ctx context.Context, w Workspace, remote, last, tag string) (string, error) {
	lease, _, err := g.commitState(ctx, w, "warren: handed to "+tag+" ("+nonce()+")", last)
	if err != nil {
		return "", err
	}
	if _, err := g.run(ctx, w.Repo, nil, "push", "--quiet", "--force", "--end-of-options", remote, lease+":"+IncomingRef(w.AgentID)); err != nil {
		return "", fmt.Errorf("handing the workspace of %s to the agents' remote %s: %w", w.AgentID, remote, err)
	}
	return lease, nil
}

// Adopt puts the worker's copy of an agent's workspace, w (Repo: a bare
// repository of the worker's, made when missing; Path: its linked
// worktree), at lease: fetched from remote's IncomingRef (ErrLeaseLost
// when that holds another commit), the worktree made or repaired, the
// branch at the lease's first parent and the files as the lease has
// them. It is idempotent: an adoption cut anywhere is finished by
// adopting again.
func (g Git) Adopt(ctx context.Context, w Workspace, remote, lease string) error {
	if _, err := os.Stat(filepath.Join(w.Repo, "HEAD")); err != nil {
		if err := os.MkdirAll(filepath.Dir(w.Repo), 0o700); err != nil {
			return err
		}
		if _, err := g.run(ctx, filepath.Dir(w.Repo), nil, "init", "-q", "--bare", "--", w.Repo); err != nil {
			return err
		}
	}
	if _, err := g.run(ctx, w.Repo, nil, "fetch", "--quiet", "--no-tags", "--end-of-options", remote,
		"+"+IncomingRef(w.AgentID)+":"+leaseRef(w.AgentID)); err != nil {
		return fmt.Errorf("fetching the workspace of %s from the agents' remote %s: %w", w.AgentID, remote, err)
	}
	out, err := g.run(ctx, w.Repo, nil, "rev-parse", leaseRef(w.AgentID), lease+"^1")
	if err != nil {
		return err
	}
	got, head, _ := strings.Cut(strings.TrimSpace(out), "\n")
	if got != lease {
		return fmt.Errorf("%w: the agents' remote holds %s for %s, not the lease %s", ErrLeaseLost, got, w.AgentID, lease)
	}
	if !g.branchExists(ctx, w) {
		if _, err := g.run(ctx, w.Repo, nil, "update-ref", "refs/heads/"+w.Branch, head); err != nil {
			return err
		}
	}
	// The copy holds nothing the remote does not (an attempt that left it
	// changed was handed back or given up): what is wrong is forced right,
	// in place (an agent's process may be working in it).
	g.unwedge(ctx, w)
	switch err := g.Check(ctx, w); {
	case err == nil:
	case errors.Is(err, errOffBranch):
		env, err := g.pin(ctx, w)
		if err != nil {
			return err
		}
		if _, err := g.run(ctx, w.Path, env, "checkout", "-q", "-f", w.Branch, "--"); err != nil {
			return err
		}
	default:
		if !errors.Is(err, errMissing) {
			if rerr := os.RemoveAll(w.Path); rerr != nil {
				return fmt.Errorf("removing the copy %s (%v): %w", w.Path, err, rerr)
			}
		}
		if _, err := g.Repair(ctx, w, time.Now()); err != nil {
			return err
		}
	}
	return g.Restore(ctx, w, lease)
}

// wedges are what a git command killed in the middle, or left for its
// user to finish, leaves in a worktree's directory of the repository;
// each refuses the commands a take-up runs.
var wedges = []string{"index.lock", "HEAD.lock", "rebase-merge", "rebase-apply", "MERGE_HEAD", "MERGE_MSG", "MERGE_MODE",
	"CHERRY_PICK_HEAD", "REVERT_HEAD", "BISECT_LOG", "BISECT_START", "BISECT_TERMS", "BISECT_NAMES", "BISECT_EXPECTED_REV",
	"BISECT_ANCESTORS_OK", "sequencer"}

// unwedge removes, from a worker's copy w, what an agent's git command
// killed in the middle or left unfinished would make the take-up fail on:
// the worktree's operation states and locks, and the locks of its branch
// and private index. Nothing when w is no worktree of its repository.
func (g Git) unwedge(ctx context.Context, w Workspace) {
	l, err := g.locate(ctx, w)
	if err != nil {
		return
	}
	for _, name := range wedges {
		_ = os.RemoveAll(filepath.Join(l.admin, name))
	}
	_ = os.Remove(filepath.Join(l.common, "refs", "heads", filepath.FromSlash(w.Branch)+".lock"))
	_ = os.Remove(l.indexFile(w.AgentID) + ".lock")
}

// Hand records the worker's copy w after an attempt (a snapshot whose
// previous one is lease) and pushes it to remote's IncomingRef, with a
// lease on lease, and w's branch, in one atomic push; ErrLeaseLost when
// the remote no longer holds lease. It returns the snapshot.
func (g Git) Hand(ctx context.Context, w Workspace, remote, message, lease string) (string, error) {
	commit, err := g.Snapshot(ctx, w, message, lease)
	if err != nil {
		return "", err
	}
	ref := IncomingRef(w.AgentID)
	_, perr := g.run(ctx, w.Repo, nil, "push", "--quiet", "--atomic", "--force-with-lease="+ref+":"+lease, "--end-of-options", remote,
		commit+":"+ref, "+refs/heads/"+w.Branch+":refs/heads/"+w.Branch)
	if perr == nil {
		return commit, nil
	}
	out, err := g.run(ctx, w.Repo, nil, "ls-remote", "--end-of-options", remote, ref)
	if err != nil {
		return "", perr
	}
	switch held, _, _ := strings.Cut(strings.TrimSpace(out), "\t"); held {
	case commit:
		return commit, nil
	case lease:
		return "", perr
	default:
		return "", fmt.Errorf("%w: the agents' remote holds %s for %s, not the lease %s", ErrLeaseLost, held, w.AgentID, lease)
	}
}

// ErrMovedMeanwhile marks a hand-back the daemon's worktree cannot take:
// its branch moved while the attempt ran (a merge into it).
var ErrMovedMeanwhile = errors.New("the workspace's branch moved while the attempt ran")

// Take brings commit, a worker's snapshot of w handed on remote's
// IncomingRef for lease, into the daemon's worktree w: fetched, checked
// to be what the remote holds and the snapshot that follows lease, checked
// that w's branch is where the lease left it (ErrMovedMeanwhile: a merge
// into it while the attempt ran, which the snapshot does not hold), made
// the head of SnapshotRef's chain, and restored (the branch at its first
// parent, the files as it has them). A restore that fails puts the lease
// back, so that w's files and branch are as the attempt found them. It is
// idempotent. Only the fetch ends with ctx: once the worktree is being
// changed, the take is finished (each call still has Git's timeout).
func (g Git) Take(ctx context.Context, w Workspace, remote, commit, lease string) error {
	ref := IncomingRef(w.AgentID)
	if _, err := g.run(ctx, w.Repo, nil, "fetch", "--quiet", "--no-tags", "--end-of-options", remote, "+"+ref+":"+ref); err != nil {
		return fmt.Errorf("fetching the workspace of %s from the agents' remote %s: %w", w.AgentID, remote, err)
	}
	ctx = context.WithoutCancel(ctx)
	out, err := g.run(ctx, w.Repo, nil, "rev-parse", ref, commit+"^2", lease+"^1", commit+"^1", "refs/heads/"+w.Branch)
	if err != nil {
		return err
	}
	got := strings.Fields(out)
	switch {
	case len(got) != 5:
		return fmt.Errorf("%w: git rev-parse answered %q", ErrGit, out)
	case got[0] != commit:
		return fmt.Errorf("%w: the agents' remote holds %s for %s, not the snapshot %s its worker reported", ErrLeaseLost, got[0], w.AgentID, commit)
	case got[1] != lease:
		return fmt.Errorf("%w: the snapshot %s of %s does not follow the lease %s", ErrLeaseLost, commit, w.AgentID, lease)
	case got[4] != got[2] && got[4] != got[3]: // not where the lease left it, nor (taken already) where the snapshot does
		return fmt.Errorf("%w: %s is at %s, the lease was handed at %s", ErrMovedMeanwhile, w.Branch, got[4], got[2])
	}
	if _, err := g.run(ctx, w.Repo, nil, "update-ref", "-m", "warren: snapshot taken from a worker", SnapshotRef(w.AgentID), commit); err != nil {
		return err
	}
	if err := g.Restore(ctx, w, commit); err != nil {
		if rerr := g.Restore(ctx, w, lease); rerr != nil {
			return fmt.Errorf("%w (and putting the lease back: %v)", err, rerr)
		}
		return err
	}
	return nil
}

// Forget deletes agent w's IncomingRef on remote, when the remote has
// it: its workspace is closed, so no attempt will take it up again. The
// agent's branch on the remote is its work, and stays (as the daemon's
// own branch does).
func (g Git) Forget(ctx context.Context, w Workspace, remote string) error {
	ref := IncomingRef(w.AgentID)
	out, err := g.run(ctx, w.Repo, nil, "ls-remote", "--end-of-options", remote, ref)
	if err != nil {
		return fmt.Errorf("listing the agents' remote %s: %w", remote, err)
	}
	if !slices.Contains(strings.Fields(out), ref) {
		return nil
	}
	if _, err := g.run(ctx, w.Repo, nil, "push", "--quiet", "--end-of-options", remote, ":"+ref); err != nil {
		return fmt.Errorf("deleting %s on the agents' remote %s: %w", ref, remote, err)
	}
	return nil
}
