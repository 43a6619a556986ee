package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/warren-dev/warren/cmd/warren/internal/top"
	"github.com/warren-dev/warren/cmd/warren/internal/usage"
)

// newTopCmd is `warren top` (SPEC 14).
func newTopCmd(c *cli) *cobra.Command {
	return &cobra.Command{
		Use:   "top",
		Short: "a live view of the team in the terminal; keys answer a wait, resume, cancel and follow an agent",
		Long: `A live view of the team: the tree with each agent's status, provider and
model, its latest event, tokens and pending messages, and the waits. It
updates as events are logged (events.subscribe). Keys: up/down (or k/j)
select an agent; a answers its wait (type, then enter); r resumes its
interrupted run; c cancels its turn; enter follows its stream (esc: back);
q quits.`,
		Example: indent("warren top\nwarren top --home /tmp/team"),
		Args:    usage.Args(0, 0),
		RunE: c.runE(func(ctx context.Context, _ *cobra.Command, _ []string) error {
			if _, err := c.daemon().Call(ctx, "daemon.status", nil); err != nil {
				return err
			}
			return top.Run(ctx, c.daemon(), c.stdin, c.stdout)
		}),
	}
}
