package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/warren-dev/warren/atomicfile"
	"github.com/warren-dev/warren/cmd/warren/internal/logcopy"
	"github.com/warren-dev/warren/cmd/warren/internal/offline"
	"github.com/warren-dev/warren/cmd/warren/internal/usage"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/store"
	"github.com/warren-dev/warren/store/local"
)

func newExportCmd(c *cli) *cobra.Command {
	var out, cluster, keys string
	cmd := &cobra.Command{
		Use:   "export REF [--out FILE] [--cluster nats://...]",
		Short: "write an agent's log as its events.jsonl (from the home or a cluster)",
		Long: `Write the log of agent REF (or USER) as the events.jsonl a home holds, line
for line: every entry is read back with its CRC and seq checked. From a
cluster (--cluster) REF must be the agent's id.`,
		Example:           indent("warren export lead --out lead.jsonl\nwarren export 0123456789abcdef0123456789abcdef --cluster nats://10.0.0.5:4222"),
		Args:              usage.Args(1, 1, "REF"),
		ValidArgsFunction: c.completer().Agents,
	}
	f := cmd.Flags()
	f.StringVar(&out, "out", "", "write to this file (atomically) instead of stdout")
	f.StringVar(&cluster, "cluster", "", "read from the NATS JetStream cluster at this URL instead of the home")
	f.StringVar(&keys, "keys", "", "with --cluster: the workers.json of a node, whose daemon key signs in to its servers (default: the home's)")
	f.Bool("unsafe-lazy-fsync", false, "accepted and not needed: export only reads, so the servers' fsync setting is not checked")
	cmd.RunE = c.runE(func(ctx context.Context, _ *cobra.Command, pos []string) error {
		st, id, done, err := c.exportSource(ctx, pos[0], cluster, keys)
		if err != nil {
			return err
		}
		defer done()
		if out == "" {
			w := bufio.NewWriter(c.stdout)
			if _, err := logcopy.Export(ctx, st, id, w); err != nil {
				return err
			}
			return w.Flush()
		}
		pr, pw := io.Pipe()
		go func() {
			w := bufio.NewWriter(pw)
			_, err := logcopy.Export(ctx, st, id, w)
			if err == nil {
				err = w.Flush()
			}
			pw.CloseWithError(err)
		}()
		b, err := io.ReadAll(pr)
		if err != nil {
			return err
		}
		abs, _ := filepath.Abs(out)
		return atomicfile.Write(faultfs.OS{}, abs, b, 0o600)
	})
	return cmd
}

// exportSource opens the store REF's log is in and resolves REF to an id.
func (c *cli) exportSource(ctx context.Context, ref, cluster, keys string) (store.Store, string, func(), error) {
	if cluster == "" {
		id := ref
		if ref != store.UserID {
			path, err := offline.LogPath(c.home, ref)
			if err != nil {
				return nil, "", nil, err
			}
			id = filepath.Base(filepath.Dir(path))
		}
		return local.New(local.Options{FS: faultfs.OS{}, Home: c.home}), id, func() {}, nil
	}
	if ref != store.UserID && !offline.IsAgentID(ref) {
		return nil, "", nil, fmt.Errorf("%w: with --cluster, give the agent's id (32 hex characters), not %q", offline.ErrUnknownAgent, ref)
	}
	st, done, err := logcopy.OpenReader(ctx, c.home, keys, cluster)
	if err != nil {
		return nil, "", nil, err
	}
	return st, ref, done, nil
}
