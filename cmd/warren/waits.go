package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/warren-dev/warren/cmd/warren/internal/render"
	"github.com/warren-dev/warren/cmd/warren/internal/reply"
	"github.com/warren-dev/warren/cmd/warren/internal/usage"
)

// newWaitsCmd lists every pending wait in the tree (SPEC 4): whoever
// started it, the operator finds it here and answers it by its token id.
func newWaitsCmd(c *cli) *cobra.Command {
	return &cobra.Command{
		Use:     "waits",
		Short:   "list every pending wait in the tree: agent, kind, token id, age, deadline, prompt",
		Example: indent("warren waits\nwarren agent resume lead/w1 --token-id ID yes   # answer one"),
		Args:    usage.Args(0, 0),
		RunE: c.runE(func(ctx context.Context, _ *cobra.Command, _ []string) error {
			res, show, err := c.callOut(ctx, "waits.list", nil)
			if err != nil || !show {
				return err
			}
			render.Waits(c.stdout, reply.List(res, "waits"), time.Now(), c.daemon().HomeArg())
			return nil
		}),
	}
}
