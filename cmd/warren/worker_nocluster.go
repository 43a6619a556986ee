//go:build nocluster

package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/warren-dev/warren/cmd/warren/internal/exit"
	"github.com/warren-dev/warren/daemon"
)

// newWorkerCmd refuses: a worker speaks NATS, which this build lacks.
func newWorkerCmd(c *cli) *cobra.Command {
	cmd := &cobra.Command{Use: "worker", Short: "run agent sessions for a cluster's daemon (not in this build)",
		DisableFlagParsing: true}
	cmd.RunE = c.runE(func(context.Context, *cobra.Command, []string) error {
		return &exit.Error{Code: exit.DaemonErr, Err: daemon.ErrNoCluster, Msg: daemon.ErrNoCluster.Error()}
	})
	return cmd
}
