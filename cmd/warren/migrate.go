package main

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/store"
	"github.com/warren-dev/warren/store/jetstream"
	"github.com/warren-dev/warren/store/local"
)

func newMigrateCmd(c *cli) *cobra.Command {
	var to string
	var lazy bool
	cmd := &cobra.Command{
		Use:   "migrate --to nats://... [--unsafe-lazy-fsync]",
		Short: "copy a stopped home's logs and session snapshots into a NATS JetStream cluster, verified",
		Long: `Copy every agent log of the home (and the USER inbox) into the cluster's
stream unchanged, line for line, then read each back and compare it byte for
byte with the home's (CRC and seq are checked on both reads). Session
snapshots are copied too. The daemon must be stopped; a log the cluster
already holds entries of is refused. The home is not changed.`,
		Example: indent("warren daemon stop && warren migrate --to nats://10.0.0.5:4222"),
		Args:    args(0, 0),
	}
	cmd.Flags().StringVar(&to, "to", "", "the NATS cluster to copy into (nats://host:port[,...])")
	cmd.Flags().BoolVar(&lazy, "unsafe-lazy-fsync", false, "accept NATS servers whose fsync setting cannot be confirmed")
	cmd.RunE = c.runE(func(ctx context.Context, cmd *cobra.Command, _ []string) error {
		if to == "" {
			return usageErr(cmd.UseLine(), "--to is required")
		}
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		cl, err := c.dial(dctx)
		cancel()
		if err == nil {
			_ = cl.Close()
			return &exitError{code: exitDaemonErr, msg: "the daemon is running: stop it first (warren daemon stop), so that nothing is appended after the copy"}
		}
		nc, err := nats.Connect(to)
		if err != nil {
			return fmt.Errorf("connecting to %s: %w", to, err)
		}
		defer nc.Close()
		js, err := jetstream.New(ctx, jetstream.Options{Conn: nc, Node: "warren-migrate", UnsafeLazyFsync: lazy})
		if err != nil {
			return err
		}
		defer js.Close()
		src := local.New(local.Options{FS: faultfs.OS{}, Home: c.home})
		n, entries, err := migrate(ctx, src, js)
		if err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "migrated %d logs (%d entries) to %s; every line verified\n", n, entries, to)
		return nil
	})
	return cmd
}

// migrate copies every log of src (agents and USER) and every session
// snapshot into dst and verifies each log by export.
func migrate(ctx context.Context, src *local.Store, dst *jetstream.Store) (logs, entries int, err error) {
	ids, err := src.Agents(ctx)
	if err != nil {
		return 0, 0, err
	}
	if _, err := (faultfs.OS{}).Stat(src.LogPath(store.UserID)); err == nil {
		ids = append(ids, store.UserID)
	}
	for _, id := range ids {
		var want bytes.Buffer
		n, err := exportLog(ctx, src, id, &want)
		if err != nil {
			return logs, entries, err
		}
		if n == 0 {
			continue // an empty log (USER before any message): the daemon creates it
		}
		if err := importLog(ctx, dst, id, want.Bytes()); err != nil {
			return logs, entries, fmt.Errorf("migrating %s: %w", id, err)
		}
		var got bytes.Buffer
		if _, err := exportLog(ctx, dst, id, &got); err != nil {
			return logs, entries, fmt.Errorf("verifying %s: %w", id, err)
		}
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			return logs, entries, fmt.Errorf("verifying %s: the cluster's log differs from the home's; do not use the cluster copy", id)
		}
		if id != store.UserID {
			// A snapshot is a cache the daemon rebuilds from the log: a
			// missing or unreadable one is not copied.
			if sn, err := src.Snapshots().Load(id); err == nil {
				if err := dst.Snapshots().Save(sn); err != nil {
					return logs, entries, fmt.Errorf("copying the session snapshot of %s: %w", id, err)
				}
			}
		}
		logs++
		entries += n
	}
	return logs, entries, nil
}

// importLog appends the lines of data to id's (empty) log in dst unchanged.
func importLog(ctx context.Context, dst *jetstream.Store, id string, data []byte) error {
	lease, err := dst.Own(ctx, id)
	if err != nil {
		return err
	}
	defer func() { _ = lease.Release(context.Background()) }()
	lg, err := dst.OpenLog(ctx, id, store.LogOptions{Lease: lease})
	if err != nil {
		return err
	}
	defer lg.Close()
	if lg.LastSeq() != 0 {
		return fmt.Errorf("the cluster already holds %d entries of this log; migrate only into a cluster without it", lg.LastSeq())
	}
	var lines [][]byte
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		lines = append(lines, data[:i+1])
		data = data[i+1:]
	}
	return lg.(*jetstream.Log).Import(lines)
}
