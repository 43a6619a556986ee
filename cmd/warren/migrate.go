package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/warren-dev/warren/cmd/warren/internal/exit"
	"github.com/warren-dev/warren/cmd/warren/internal/logcopy"
	"github.com/warren-dev/warren/cmd/warren/internal/usage"
)

func newMigrateCmd(c *cli) *cobra.Command {
	var to, keys string
	var lazy bool
	cmd := &cobra.Command{
		Use:   "migrate --to nats://... [--unsafe-lazy-fsync]",
		Short: "copy a stopped home's logs and session snapshots into a NATS JetStream cluster, verified",
		Long: `Copy every agent log of the home (and the USER inbox) into the cluster's
stream unchanged, line for line, then read each back and compare it byte for
byte with the home's (CRC and seq are checked on both reads). Session
snapshots are copied too. The daemon must be stopped; a log the cluster
already holds entries of is refused. The home is not changed. A daemon's
embedded servers let in only its key: give a node's workers.json with --keys.`,
		Example: indent("warren daemon stop && warren migrate --to nats://10.0.0.5:4222 --keys n1-workers.json"),
		Args:    usage.Args(0, 0),
	}
	cmd.Flags().StringVar(&to, "to", "", "the NATS cluster to copy into (nats://host:port[,...])")
	cmd.Flags().BoolVar(&lazy, "unsafe-lazy-fsync", false, "accept NATS servers whose fsync setting cannot be confirmed")
	cmd.Flags().StringVar(&keys, "keys", "", "the workers.json of a node of the cluster, whose daemon key signs in to its servers (default: the home's)")
	cmd.RunE = c.runE(func(ctx context.Context, cmd *cobra.Command, _ []string) error {
		if to == "" {
			return exit.Usagef(cmd.UseLine(), "--to is required")
		}
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		cl, err := c.daemon().Dial(dctx)
		cancel()
		if err == nil {
			_ = cl.Close()
			return &exit.Error{Code: exit.DaemonErr, Msg: "the daemon is running: stop it first (warren daemon stop), so that nothing is appended after the copy"}
		}
		n, entries, err := logcopy.Migrate(ctx, c.home, keys, to, lazy)
		if err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "migrated %d logs (%d entries) to %s; every line verified\n", n, entries, to)
		return nil
	})
	return cmd
}
