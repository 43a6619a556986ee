package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

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
		Args: args(0, 0),
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
			if !contains(statuses, s) {
				msg := fmt.Sprintf("unknown status %q (one of %s)", s, strings.Join(statuses, ", "))
				if m := suggest.Closest(s, statuses, 3); m != "" {
					msg += "; did you mean " + m + "?"
				}
				return usageErr(cmd.UseLine(), "%s", msg)
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
		res, show, err := c.callOut(ctx, "agent.list", params)
		if err != nil || !show {
			return err
		}
		return c.printList(ctx, list(res, "agents"), wide, all, len(status) > 0)
	})
	return cmd
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// printList renders agent.list items as a table, then one line per agent
// that has an error, is degraded or waits for input.
func (c *cli) printList(ctx context.Context, agents []map[string]any, wide, all, filtered bool) error {
	if len(agents) == 0 {
		if filtered {
			fmt.Fprintln(c.stdout, "no agents in that status")
		} else {
			fmt.Fprintln(c.stdout, "no agents")
		}
		return nil
	}
	sortAgents(agents)
	now := time.Now()
	header := []string{"PATH", "STATUS", "PENDING"}
	if all {
		header = append(header, "ENDED")
	}
	if wide {
		header = append(header, "PROVIDER", "MODEL", "LAST TURN", "TOKENS (IN/OUT/CACHED)")
	}
	rows := make([][]string, 0, len(agents))
	for _, a := range agents {
		row := []string{str(a, "path"), str(a, "status"), strconv.FormatInt(num(a, "pending"), 10)}
		if all {
			row = append(row, agoCell(now, str(a, "terminated_at")))
		}
		if wide {
			row = append(row, dash(str(a, "provider")), dash(str(a, "model")), agoCell(now, str(a, "last_turn_at")), dash(usageText(obj(a, "usage"))))
		}
		rows = append(rows, row)
	}
	table(c.stdout, header, rows)
	for _, a := range agents {
		if e := str(a, "error"); e != "" {
			fmt.Fprintf(c.stdout, "%s: %s\n", str(a, "path"), e)
		}
		if e := str(a, "degraded"); e != "" {
			fmt.Fprintf(c.stdout, "%s: degraded: %s\n", str(a, "path"), e)
		}
		if str(a, "status") != "suspended" {
			continue
		}
		wait := obj(a, "wait")
		if wait == nil {
			if in, err := c.call(ctx, "agent.inspect", map[string]any{"agent_id": str(a, "agent_id")}); err == nil {
				wait = obj(in, "wait")
			}
		}
		if wait != nil {
			fmt.Fprintf(c.stdout, "%s is waiting: %s\n", str(a, "path"), cut(str(wait, "prompt"), 100))
		}
	}
	return nil
}

// sortAgents orders agents by path, segment by segment and naturally (a
// parent right before its children; w2 before w10); at the same path live
// agents come first, then terminated ones by when they ended.
func sortAgents(agents []map[string]any) {
	sort.SliceStable(agents, func(i, j int) bool {
		a, b := agents[i], agents[j]
		if c := comparePaths(str(a, "path"), str(b, "path")); c != 0 {
			return c < 0
		}
		ta, tb := str(a, "terminated_at"), str(b, "terminated_at")
		if (ta == "") != (tb == "") {
			return ta == ""
		}
		return ta < tb
	})
}

// comparePaths compares slash paths segment by segment with naturalCompare.
func comparePaths(a, b string) int {
	as, bs := strings.Split(a, "/"), strings.Split(b, "/")
	for i := 0; i < len(as) && i < len(bs); i++ {
		if c := naturalCompare(as[i], bs[i]); c != 0 {
			return c
		}
	}
	return len(as) - len(bs)
}

// naturalCompare compares strings with runs of digits taken as numbers
// ("w2" < "w10"); equal numbers with more leading zeros come later.
func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		if isDigit(a[0]) && isDigit(b[0]) {
			da, db := digitRun(a), digitRun(b)
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if len(na) != len(nb) {
				return len(na) - len(nb)
			}
			if c := strings.Compare(na, nb); c != 0 {
				return c
			}
			if da != db {
				return da - db
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return int(a[0]) - int(b[0])
		}
		a, b = a[1:], b[1:]
	}
	return len(a) - len(b)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func digitRun(s string) int {
	n := 0
	for n < len(s) && isDigit(s[n]) {
		n++
	}
	return n
}
