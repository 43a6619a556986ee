package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/warren-dev/warren/cmd/warren/internal/exit"
	"github.com/warren-dev/warren/cmd/warren/internal/reply"
	"github.com/warren-dev/warren/cmd/warren/internal/usage"
)

// newNotifyCmd is `warren notify`: the notification sinks of config.json
// (SPEC 14).
func newNotifyCmd(c *cli) *cobra.Command {
	cmd := group("notify", "notifications of waits, failures, interruptions and messages to you (config.json \"notify\")",
		"warren notify test\nwarren notify log --limit 20")
	testCmd := &cobra.Command{
		Use:     "test",
		Short:   "send a sample notification to every sink and say what each did with it",
		Example: indent("warren notify test"),
		Args:    usage.Args(0, 0),
		RunE: c.runE(func(ctx context.Context, _ *cobra.Command, _ []string) error {
			res, show, err := c.callOut(ctx, "notify.test", nil)
			if err != nil || !show {
				return err
			}
			failed := 0
			for _, s := range reply.List(res, "sinks") {
				if ok, _ := s["ok"].(bool); ok {
					fmt.Fprintf(c.stdout, "%s: delivered\n", reply.Str(s, "name"))
				} else {
					failed++
					fmt.Fprintf(c.stdout, "%s: FAILED: %s\n", reply.Str(s, "name"), reply.Str(s, "error"))
				}
			}
			if failed > 0 {
				return exit.Failf("%d of the sinks did not take the test notification", failed)
			}
			return nil
		}),
	}
	var limit int
	logCmd := &cobra.Command{
		Use:     "log",
		Short:   "what each sink acknowledged, from notify.jsonl (oldest first)",
		Example: indent("warren notify log\nwarren notify log --limit 1000"),
		Args:    usage.Args(0, 0),
		RunE: c.runE(func(ctx context.Context, _ *cobra.Command, _ []string) error {
			res, show, err := c.callOut(ctx, "notify.log", map[string]any{"limit": limit})
			if err != nil || !show {
				return err
			}
			lines, _ := res["lines"].([]any)
			for _, l := range lines {
				fmt.Fprintln(c.stdout, l)
			}
			return nil
		}),
	}
	logCmd.Flags().IntVar(&limit, "limit", 100, "how many of the last lines (1 to 10000)")
	cmd.AddCommand(testCmd, logCmd)
	return cmd
}
