package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/warren-dev/warren/cmd/warren/internal/events"
	"github.com/warren-dev/warren/cmd/warren/internal/exit"
	"github.com/warren-dev/warren/cmd/warren/internal/usage"
)

func newEventsCmd(c *cli) *cobra.Command {
	var follow, deltas bool
	var since int
	cmd := &cobra.Command{
		Use:   "events [-f] [--since SEQ] [--deltas] [REF]",
		Short: "print the logged events through the daemon; -f follows live events until Ctrl-C",
		Long: `Without -f, print the events the daemon has logged (of REF, or of every live
agent in path order) and exit, as warren logs does with the files. With -f,
print events as the daemon logs them, until Ctrl-C; --since SEQ first
replays the logged events after SEQ. A stream that ends because the daemon
stopped says so and exits 3.`,
		Example: indent(`warren events lead
warren events -f
warren events -f --since 0 lead/w1
warren events -f --deltas lead   # response text as the model streams it`),
		Args:              usage.Args(0, 1, "REF"),
		ValidArgsFunction: c.completer().Agents,
	}
	f := cmd.Flags()
	f.BoolVarP(&follow, "follow", "f", false, "follow: print events as they are logged, until Ctrl-C")
	f.IntVar(&since, "since", -1, "only the logged events after this seq (with -f: replay them first, then follow)")
	f.BoolVar(&deltas, "deltas", false, "with -f, also print response text as models stream it (turn.delta, not logged)")
	cmd.RunE = c.runE(func(ctx context.Context, cmd *cobra.Command, pos []string) error {
		ref := ""
		if len(pos) == 1 {
			ref = pos[0]
		}
		if !follow {
			if deltas {
				return exit.Usagef(cmd.UseLine(), "--deltas are streamed, never logged: use it with -f")
			}
			return c.events().Logged(ctx, ref, max(since, 0))
		}
		return c.events().Follow(ctx, ref, since, deltas)
	})
	return cmd
}

// events prints agents' events through the daemon.
func (c *cli) events() *events.Printer {
	return &events.Printer{Daemon: c.daemon(), Stdout: c.stdout, Stderr: c.stderr, JSON: c.json}
}
