package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/warren-dev/warren/cmd/warren/internal/exit"
	"github.com/warren-dev/warren/cmd/warren/internal/render"
	"github.com/warren-dev/warren/cmd/warren/internal/reply"
	"github.com/warren-dev/warren/cmd/warren/internal/usage"
	"github.com/warren-dev/warren/internal/suggest"
)

// statuses are the agent statuses (SPEC 4) that --status takes.
var statuses = []string{"idle", "running", "suspended", "interrupted_startup", "interrupted_waiting", "terminated", "corrupt"}

func newAgentListCmd(c *cli) *cobra.Command {
	var wide, all bool
	var status []string
	cmd := &cobra.Command{
		Use:     "list [--all] [--status S] [--wide]",
		Aliases: []string{"ls"},
		Short:   "list the agents by path (naturally sorted: w2 before w10)",
		Long: `List the agents by path, in tree order, numbers in names sorted as numbers.
--all adds the terminated agents and when they ended; --status keeps the
agents in the given statuses (repeat it, or separate them with commas;
terminated implies --all); --wide adds the provider, the model, when the
last turn started and the tokens used (in/out/cached).`,
		Example: indent(`warren agent list
warren agent ls --wide
warren agent list --all --status terminated
warren agent list --status suspended,interrupted_waiting --json`),
		Args: usage.Args(0, 0),
	}
	f := cmd.Flags()
	f.BoolVar(&wide, "wide", false, "also show provider, model, last turn and tokens")
	f.BoolVar(&all, "all", false, "also show terminated agents, with when they ended")
	f.StringSliceVar(&status, "status", nil, "only agents in this status: "+strings.Join(statuses, ", "))
	_ = cmd.RegisterFlagCompletionFunc("status", cobra.FixedCompletions(statuses, cobra.ShellCompDirectiveNoFileComp))
	cmd.ValidArgsFunction = cobra.NoFileCompletions
	cmd.RunE = c.runE(func(ctx context.Context, cmd *cobra.Command, _ []string) error {
		params := map[string]any{}
		for _, s := range status {
			if !slices.Contains(statuses, s) {
				msg := fmt.Sprintf("unknown status %q (one of %s)", s, strings.Join(statuses, ", "))
				if m := suggest.Closest(s, statuses, 3); m != "" {
					msg += "; did you mean " + m + "?"
				}
				return exit.Usagef(cmd.UseLine(), "%s", msg)
			}
			if s == "terminated" {
				all = true
			}
		}
		if all {
			params["all"] = true
		}
		if len(status) > 0 {
			params["status"] = strings.Join(status, ",")
		}
		res, show, err := c.listOut(ctx, params)
		if err != nil || !show {
			return err
		}
		waitOf := func(id string) map[string]any {
			if in, err := c.daemon().Call(ctx, "agent.inspect", map[string]any{"agent_id": id}); err == nil {
				return reply.Obj(in, "wait")
			}
			return nil
		}
		render.AgentList(c.stdout, reply.List(res, "agents"), render.ListView{Wide: wide, All: all, Filtered: len(status) > 0}, time.Now(), waitOf)
		return nil
	})
	return cmd
}
