package main

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/warren-dev/warren/cmd/warren/internal/exit"
	"github.com/warren-dev/warren/cmd/warren/internal/render"
	"github.com/warren-dev/warren/cmd/warren/internal/reply"
	"github.com/warren-dev/warren/cmd/warren/internal/usage"
)

// The commands on agents' workspaces (SPEC 12): their snapshots, what a
// turn changed, restoring a snapshot, merging a child's branch.

func newWorkspaceCmds(c *cli) []*cobra.Command {
	logCmd := &cobra.Command{
		Use:               "log REF",
		Short:             "list an agent's workspace snapshots (start and end of every turn) with the files each changed",
		Example:           indent("warren workspace log lead/w1\nwarren workspace log lead/w1 --json"),
		Args:              usage.Args(1, 1, "REF"),
		ValidArgsFunction: c.completer().Agents,
		RunE: c.runE(func(ctx context.Context, _ *cobra.Command, pos []string) error {
			res, show, err := c.callOut(ctx, "workspace.log", map[string]any{"agent_id": pos[0]})
			if err != nil || !show {
				return err
			}
			render.WorkspaceLog(c.stdout, res, time.Now())
			return nil
		}),
	}
	var turn int
	diffCmd := &cobra.Command{
		Use:   "diff REF [--turn N]",
		Short: "show what an agent's workspace changed: since its base, or in turn N (its start snapshot to its end)",
		Long: `Print the patch of an agent's workspace: from the commit it was made at to its
latest snapshot, or with --turn N, from turn N's start snapshot to its end
snapshot. It runs git in the workspace's repository.`,
		Example:           indent("warren workspace diff lead/w1\nwarren workspace diff lead/w1 --turn 3"),
		Args:              usage.Args(1, 1, "REF"),
		ValidArgsFunction: c.completer().Agents,
		RunE: c.runE(func(ctx context.Context, cmd *cobra.Command, pos []string) error {
			res, err := c.daemon().Call(ctx, "workspace.log", map[string]any{"agent_id": pos[0]})
			if err != nil {
				return err
			}
			from, to, err := diffRange(res, turn, cmd.Flags().Changed("turn"))
			if err != nil {
				return err
			}
			out, err := exec.CommandContext(ctx, "git", "-C", reply.Str(res, "repo"), "diff", "--no-color", from, to).CombinedOutput()
			if err != nil {
				return exit.Failf("git diff %s %s: %v: %s", from, to, err, out)
			}
			_, err = c.stdout.Write(out)
			return err
		}),
	}
	diffCmd.Flags().IntVar(&turn, "turn", 0, "the turn whose changes to show (its start snapshot to its end)")
	restoreCmd := &cobra.Command{
		Use:   "restore REF COMMIT",
		Short: "put one of an agent's workspace snapshots back (the agent must be at rest)",
		Long: `Put a snapshot (a commit listed by warren workspace log) back in the agent's
worktree: its branch goes back to the head it had then (the head it leaves is
kept under refs/warren/interrupted/<id>), changed files are rewritten, files
created since are removed, ignored files are left alone. Logged as
workspace.restored.`,
		Example:           indent("warren workspace restore lead/w1 3f9c2e1"),
		Args:              usage.Args(2, 2, "REF", "COMMIT"),
		ValidArgsFunction: c.completer().Agents,
		RunE: c.runE(func(ctx context.Context, _ *cobra.Command, pos []string) error {
			res, show, err := c.callOut(ctx, "workspace.restore", map[string]any{"agent_id": pos[0], "commit": pos[1]})
			if err != nil || !show {
				return err
			}
			fmt.Fprintf(c.stdout, "restored %s to %s\n", pos[0], reply.Str(res, "commit"))
			return nil
		}),
	}
	mergeCmd := &cobra.Command{
		Use:   "merge CHILD",
		Short: "merge a child's branch into its parent's workspace (the child's uncommitted work committed first)",
		Long: `Commit what is left in the child's worktree to its branch, then merge the
branch into its parent's worktree (a merge commit). On conflicts the merge is
aborted, the parent's files are left as they were, and the conflicting paths
are named (exit 1). A child that completed (terminated) is merged from its
branch. Logged as workspace.merged in the parent's log.`,
		Example:           indent("warren workspace merge lead/w1"),
		Args:              usage.Args(1, 1, "CHILD"),
		ValidArgsFunction: c.completer().Agents,
		RunE: c.runE(func(ctx context.Context, _ *cobra.Command, pos []string) error {
			res, show, err := c.callOut(ctx, "workspace.merge", map[string]any{"agent_id": pos[0]})
			if err != nil || !show {
				return err
			}
			fmt.Fprintf(c.stdout, "merged %s (%s) as %s\n", pos[0], reply.Str(res, "branch"), render.Cut(reply.Str(res, "commit"), 12))
			return nil
		}),
	}
	return []*cobra.Command{logCmd, diffCmd, restoreCmd, mergeCmd}
}

// diffRange is the range workspace diff shows: the workspace's base to
// its latest snapshot, or turn's start snapshot to its end.
func diffRange(res map[string]any, turn int, byTurn bool) (from, to string, err error) {
	snaps := reply.List(res, "snapshots")
	if !byTurn {
		if len(snaps) == 0 {
			return "", "", exit.Failf("the workspace has no snapshot yet (no turn ran in it)")
		}
		return reply.Str(res, "base"), reply.Str(snaps[len(snaps)-1], "commit"), nil
	}
	for _, s := range snaps {
		if reply.Num(s, "turn") != int64(turn) {
			continue
		}
		switch reply.Str(s, "at") {
		case "start":
			from = reply.Str(s, "commit")
		case "end":
			to = reply.Str(s, "commit")
		}
	}
	if from == "" || to == "" {
		return "", "", exit.Failf("turn %s has no start and end snapshots (warren workspace log lists them)", strconv.Itoa(turn))
	}
	return from, to, nil
}
