package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/warren-dev/warren/cmd/warren/internal/exit"
	"github.com/warren-dev/warren/cmd/warren/internal/reply"
	"github.com/warren-dev/warren/cmd/warren/internal/usage"
)

// newAgentBudgetCmd is `warren agent budget` (SPEC 13).
func newAgentBudgetCmd(c *cli) *cobra.Command {
	var tokens, turns int64
	var usd float64
	var add bool
	cmd := &cobra.Command{
		Use:   "budget REF [--tokens N] [--usd X] [--turns N] [--add]",
		Short: "set (or with --add raise) an agent's budget for its subtree; a run waiting on it goes on",
		Long: `Set the budget of REF and everything below it: tokens (input plus output),
dollars (needs a price for its model in config.json's "prices") and turns.
Each limit given replaces the current one, or with --add raises it. A run
of the subtree suspended because the budget was spent (a wait of kind
budget, in warren waits) is resumed once there is room again.`,
		Example: indent("warren agent budget lead --tokens 2000000 --usd 20\nwarren agent budget lead --add --usd 5"),
		Args:    usage.Args(1, 1, "REF"),
		RunE: c.runE(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			p := map[string]any{"agent_id": args[0], "add": add}
			f := cmd.Flags()
			if f.Changed("tokens") {
				p["tokens"] = tokens
			}
			if f.Changed("usd") {
				p["usd"] = usd
			}
			if f.Changed("turns") {
				p["turns"] = turns
			}
			if len(p) == 2 {
				return exit.Usagef(cmd.UseLine(), "give --tokens, --usd or --turns")
			}
			res, show, err := c.callOut(ctx, "agent.budget", p)
			if err != nil || !show {
				return err
			}
			b := reply.Obj(res, "budget")
			fmt.Fprintf(c.stdout, "budget of %s: tokens %s, usd %s, turns %s\n", args[0], limit(b["tokens"]), limit(b["usd"]), limit(b["turns"]))
			return nil
		}),
	}
	cmd.Flags().Int64Var(&tokens, "tokens", 0, "tokens (input plus output) for the subtree")
	cmd.Flags().Float64Var(&usd, "usd", 0, "US dollars for the subtree (the model needs a price in config.json)")
	cmd.Flags().Int64Var(&turns, "turns", 0, "completed turns for the subtree")
	cmd.Flags().BoolVar(&add, "add", false, "raise the current limits by these amounts")
	return cmd
}

func limit(v any) string {
	if v == nil {
		return "unlimited"
	}
	return fmt.Sprint(v)
}
