package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/warren-dev/warren/cmd/warren/internal/client"
	"github.com/warren-dev/warren/cmd/warren/internal/exit"
	"github.com/warren-dev/warren/cmd/warren/internal/offline"
	"github.com/warren-dev/warren/cmd/warren/internal/render"
	"github.com/warren-dev/warren/cmd/warren/internal/reply"
	"github.com/warren-dev/warren/cmd/warren/internal/usage"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/stderrlog"
)

func (c *cli) printEntry(e eventlog.Entry) error {
	if c.json {
		return reply.JSON(c.stdout, render.EntryJSON(e))
	}
	_, err := fmt.Fprintln(c.stdout, render.EntryLine(e))
	return err
}

func newLogsCmd(c *cli) *cobra.Command {
	var follow, stderrOnly bool
	cmd := &cobra.Command{
		Use:   "logs REF [-f | --stderr]",
		Short: "read an agent's log file (works while the daemon is down); -f follows it",
		Long: `Print an agent's event log from its file, without the daemon. REF resolves as
the daemon resolves it: live agents first, an ambiguous name is an error
listing the paths, a terminated agent by its name or id. -f follows the file
as it grows (fsnotify) until Ctrl-C. --stderr prints instead what the agent's
processes wrote to stderr, kept (1 MiB, then rotated once) in
<home>/agents/<id>/stderr.log, healthy turns included.`,
		Example:           indent("warren logs lead\nwarren logs -f lead/w1\nwarren logs --stderr bot\nwarren logs 0123456789abcdef0123456789abcdef --json"),
		Args:              usage.Args(1, 1, "REF"),
		ValidArgsFunction: c.completer().Agents,
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "follow the log as it grows, until Ctrl-C")
	cmd.Flags().BoolVar(&stderrOnly, "stderr", false, "print what the agent's processes wrote to stderr (agents/<id>/stderr.log) instead of the event log")
	cmd.RunE = c.runE(func(ctx context.Context, cc *cobra.Command, pos []string) error {
		if stderrOnly {
			if follow {
				return exit.Usagef(cc.UseLine(), "--stderr cannot follow (-f): use tail -F on %s in the agent's directory", stderrlog.Name)
			}
			path, err := offline.LogPath(c.home, pos[0])
			if err != nil && (offline.ClusterHome(c.home) || c.daemonIsClustered(ctx)) {
				// A cluster home keeps no log files: the daemon names
				// the agent; its stderr is kept here all the same.
				res, ierr := c.daemon().Call(ctx, "agent.inspect", map[string]any{"agent_id": pos[0], "limit": 1})
				if ierr != nil {
					return c.daemon().Lost(ctx, &client.CallError{Method: "agent.inspect", Err: ierr})
				}
				path, err = filepath.Join(c.home, "agents", reply.Str(res, "agent_id"), "events.jsonl"), nil
			}
			if err != nil {
				return err
			}
			return c.printStderrLog(path)
		}
		return c.logs(ctx, pos[0], follow)
	})
	return cmd
}

func (c *cli) logs(ctx context.Context, ref string, follow bool) error {
	path, err := offline.LogPath(c.home, ref)
	if err != nil {
		if offline.ClusterHome(c.home) || c.daemonIsClustered(ctx) {
			// The logs of a cluster home are in NATS JetStream: read
			// through the daemon, which reads the store.
			return c.logsFromDaemon(ctx, ref, follow)
		}
		return err
	}
	if follow {
		return offline.Follow(ctx, path, c.printEntry)
	}
	n, err := offline.Read(path, ref, c.printEntry)
	if err != nil {
		return err
	}
	if n == 0 && !c.json {
		fmt.Fprintln(c.stdout, "no events")
	}
	return nil
}

func newRepairCmd(c *cli) *cobra.Command {
	var cluster string
	cmd := &cobra.Command{
		Use:               "repair REF",
		Short:             "keep a copy of a corrupt log and cut it to its last good entry (with the daemon stopped)",
		Example:           indent(`warren daemon stop && warren repair lead && warren daemon start`),
		Args:              usage.Args(1, 1, "REF"),
		ValidArgsFunction: c.completer().Agents,
		RunE:              c.runE(func(ctx context.Context, _ *cobra.Command, pos []string) error { return c.repair(ctx, pos[0], cluster) }),
	}
	cmd.Flags().StringVar(&cluster, "cluster", "", "refused: a log in a NATS JetStream cluster is not repaired (see the error)")
	return cmd
}

func (c *cli) repair(ctx context.Context, ref, cluster string) error {
	if err := offline.RefuseClusterRepair(c.home, cluster, nil); err != nil {
		return err
	}
	if err := c.refuseWhileRunning(ctx, ref); err != nil {
		return err
	}
	path, err := offline.LogPath(c.home, ref)
	if err != nil {
		if cerr := offline.RefuseClusterRepair(c.home, "", err); cerr != nil {
			return cerr
		}
		return err
	}
	rep, err := eventlog.Repair(faultfs.OS{}, path)
	if err != nil {
		return fmt.Errorf("repair %s: %w", path, err)
	}
	if c.json {
		return reply.JSON(c.stdout, render.RepairJSON(rep))
	}
	fmt.Fprintln(c.stdout, render.Repair(path, rep))
	return nil
}

// refuseWhileRunning stops a repair while the daemon runs: it keeps the
// agent's log open and listed as corrupt, and would not see a repair made
// behind its back until a restart (issue 14). The error says what to do.
func (c *cli) refuseWhileRunning(ctx context.Context, ref string) error {
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cl, err := c.daemon().Dial(dctx)
	if err != nil {
		return nil // not running (or not reachable): the files are ours
	}
	_ = cl.Close()
	home := c.daemon().HomeArg()
	return exit.Failf(
		"the daemon is running: it holds the agent's log open and would not see a repair until it restarts. "+
			"Stop it, repair, start it again: warren daemon stop%s && warren repair %s%s && warren daemon start%s",
		home, render.ShellQuote(ref), home, home)
}

// logsFromDaemon prints ref's log as the daemon reads it from a cluster
// store (agent.log, page by page), in the same form as from a file; -f
// then follows the daemon's events. A standby answers with the active
// node's name.
func (c *cli) logsFromDaemon(ctx context.Context, ref string, follow bool) error {
	d := c.daemon()
	var next int64
	n := 0
	for {
		page, err := d.Call(ctx, "agent.log", map[string]any{"agent_id": ref, "since_seq": next})
		if err != nil {
			return d.Lost(ctx, &client.CallError{Method: "agent.log", Err: err})
		}
		for _, ev := range reply.List(page, "events") {
			e, err := entryOf(ev)
			if err != nil {
				return err
			}
			if err := c.printEntry(e); err != nil {
				return err
			}
			n++
		}
		if more, _ := page["more"].(bool); !more {
			next = reply.Num(page, "next_seq")
			break
		}
		next = reply.Num(page, "next_seq")
	}
	if follow {
		return c.events().Follow(ctx, ref, int(next), false)
	}
	if n == 0 && !c.json {
		fmt.Fprintln(c.stdout, "no events")
	}
	return nil
}

// daemonIsClustered reports whether the home's daemon answers with a
// cluster block (its logs are in NATS JetStream, --cluster URL).
func (c *cli) daemonIsClustered(ctx context.Context) bool {
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := c.daemon().Call(dctx, "daemon.status", nil)
	return err == nil && reply.Obj(st, "cluster") != nil
}

// entryOf is the log entry an agent.log event map describes.
func entryOf(ev map[string]any) (eventlog.Entry, error) {
	ts, err := time.Parse(time.RFC3339Nano, reply.Str(ev, "ts"))
	if err != nil {
		return eventlog.Entry{}, fmt.Errorf("the daemon sent an entry with ts %q: %w", reply.Str(ev, "ts"), err)
	}
	data, err := json.Marshal(reply.Plain(ev["data"]))
	if err != nil {
		return eventlog.Entry{}, err
	}
	return eventlog.Entry{Seq: uint64(reply.Num(ev, "seq")), TS: ts, Event: reply.Str(ev, "event"), Data: data}, nil
}
