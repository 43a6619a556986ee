// Package workspace is an agent's workspace (SPEC 12): a linked git
// worktree of a repository, on a branch of its own, whose state the
// daemon records at the start and at the end of every turn, so that an
// interrupted turn's edits can be rolled back before it is re-run, as its
// tool calls are answered from the log.
//
// Everything goes through the git command line (Git), with hooks off for
// warren's own commits, git's fsync on for every object and ref it writes
// (core.fsync=all; core.fsync=committed for the calls on a private index,
// which is a cache: losing it costs hashing the files again), a timeout
// per call, and errors that say which call failed and what git said. git
// 2.36 or later is needed (core.fsync).
//
// # Layout
//
//   - The worktree: <home>/workspaces/<agent-id>, made by
//     `git worktree add -b <branch> <path> <base>` in the repository.
//   - The branch: warren/<agent path with "/" as "-">-<first 8 hex of the id>
//     (BranchName).
//   - Snapshots: commit objects whose tree is the worktree's whole state
//     (every tracked and untracked file that is not ignored), whose first
//     parent is the branch head (a child branched from one shares the
//     branch's history) and second the previous snapshot, the chain
//     referenced by refs/warren/snapshots/<agent-id> so that git's garbage
//     collection keeps them all. They are built with a private index,
//     <git common dir>/warren/index-<agent-id>, so that only files changed
//     since the last snapshot are hashed and the agent's branch, HEAD and
//     index are never touched.
//
// # Operations
//
//   - Create makes the worktree (or adopts the one a crash left: the same
//     directory, linked to the repository, on the branch) and copies the
//     listed ignored files into it, each resolved inside the repository
//     (no "..", no link leading out), at most CopyMax bytes each.
//   - Snapshot records the state and returns the commit.
//   - Restore puts a snapshot back: changed files rewritten, files created
//     since removed, ignored files left alone. It first records the
//     current state in the private index (so git knows which files are
//     there) and then reads the snapshot's tree into it, updating the
//     worktree (`git read-tree -u --reset`). It is idempotent: a crash in
//     the middle is recovered by restoring again.
//   - Close commits what is left on the branch ("warren: work left by
//     <path>"), removes the worktree directory and keeps the branch.
//   - Merge commits a child's leftovers to its branch, and the parent's to
//     its own, and merges the child's branch into the parent's worktree
//     (--no-ff); on a conflict it aborts, leaves the parent as it was, and
//     returns the conflicting paths.
//   - Check and Repair compare the worktree with what the log says (the
//     directory exists, is a linked worktree of the repository, on the
//     branch) and repair it from the branch: a missing directory is made
//     again, a directory that is no worktree is moved aside (never
//     deleted) and made again, a branch renamed inside the worktree gets
//     its name back.
//
// Nothing here removes a branch or a worktree but Close (the worktree,
// keeping the branch) and Discard (both, for an agent whose creation
// failed after git made them: they hold nothing of anyone's work).
//
// # Held to the logged repository
//
// A sandboxed agent can write its worktree, its .git file included, and
// the directory the repository keeps for the worktree. So every call on
// a worktree names the repository's directories itself (GIT_DIR,
// GIT_COMMON_DIR and GIT_WORK_TREE: pin), found from the logged
// repository and never from the worktree, after checking that the
// worktree's directory in the repository names the repository (git reads
// refs through its commondir whatever the environment says); Check reads
// the .git file as data. Otherwise a git directory the agent made, whose
// config runs a command (core.fsmonitor), would run it as the daemon.
//
// # Workspaces on workers
//
// An agent's workspace moves to the worker running one attempt of its
// turn, and back, through the agents' remote (remote.go):
//
//   - Lease (the daemon): a commit of the worktree's whole state, parents
//     the branch head and the latest snapshot (the chain goes on through
//     it), its message naming the attempt, pushed (forced) to
//     IncomingRef, refs/warren/incoming/<agent-id>.
//   - Adopt (the worker): its copy is a linked worktree of a bare
//     repository of its own (Workspace.Repo, outside the worktree), made
//     when missing and repaired when broken; the lease is fetched (to
//     refs/warren/lease/<agent-id>), refused when the remote no longer
//     holds it (ErrLeaseLost), and restored: the branch at its first
//     parent, the files as it has them.
//   - Hand (the worker, after an attempt; not one that suspended its
//     run): a snapshot of the copy whose previous one is the lease,
//     pushed to IncomingRef with a lease on the lease
//     (--force-with-lease) and the branch, in one atomic push;
//     ErrLeaseLost when another attempt holds the workspace.
//   - Take (the daemon): IncomingRef fetched into the repository, checked
//     to hold the worker's snapshot and that snapshot to follow the lease,
//     the worktree's branch checked to be where the lease left it
//     (ErrMovedMeanwhile: a merge into it meanwhile, which the snapshot
//     would undo), made SnapshotRef, and restored into the worktree; a
//     restore that fails restores the lease.
//   - Forget (the daemon, when the workspace closes): IncomingRef
//     deleted on the remote, when there; the branch there stays.
//
// Lease, Adopt and Take are idempotent; a Hand cut short leaves the
// remote at the lease or at its own snapshot, which only a Take of the
// commit the worker reported brings home. Adopt forces a copy that is off
// its branch or no worktree back (it holds nothing the remote does not).
//
// Dirs gives package sandbox the repository's directories of a worktree,
// found as pin finds them, and makes the files it binds read-only over
// them exist.
package workspace
