package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/warren-dev/warren/atomicfile"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/store"
	"github.com/warren-dev/warren/store/local"
)

func newExportCmd(c *cli) *cobra.Command {
	var out, cluster string
	cmd := &cobra.Command{
		Use:   "export REF [--out FILE] [--cluster nats://...]",
		Short: "write an agent's log as its events.jsonl (from the home or a cluster)",
		Long: `Write the log of agent REF (or USER) as the events.jsonl a home holds, line
for line: every entry is read back with its CRC and seq checked. From a
cluster (--cluster) REF must be the agent's id.`,
		Example:           indent("warren export lead --out lead.jsonl\nwarren export 0123456789abcdef0123456789abcdef --cluster nats://10.0.0.5:4222"),
		Args:              args(1, 1, "REF"),
		ValidArgsFunction: c.completeAgents,
	}
	f := cmd.Flags()
	f.StringVar(&out, "out", "", "write to this file (atomically) instead of stdout")
	f.StringVar(&cluster, "cluster", "", "read from the NATS JetStream cluster at this URL instead of the home")
	f.Bool("unsafe-lazy-fsync", false, "accepted and not needed: export only reads, so the servers' fsync setting is not checked")
	cmd.RunE = c.runE(func(ctx context.Context, _ *cobra.Command, pos []string) error {
		st, id, done, err := c.exportSource(ctx, pos[0], cluster)
		if err != nil {
			return err
		}
		defer done()
		if out == "" {
			w := bufio.NewWriter(c.stdout)
			if _, err := exportLog(ctx, st, id, w); err != nil {
				return err
			}
			return w.Flush()
		}
		pr, pw := io.Pipe()
		go func() {
			w := bufio.NewWriter(pw)
			_, err := exportLog(ctx, st, id, w)
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
func (c *cli) exportSource(ctx context.Context, ref, cluster string) (store.Store, string, func(), error) {
	if cluster == "" {
		id := ref
		if ref != store.UserID {
			path, err := agentLogPath(c.home, ref)
			if err != nil {
				return nil, "", nil, err
			}
			id = filepath.Base(filepath.Dir(path))
		}
		return local.New(local.Options{FS: faultfs.OS{}, Home: c.home}), id, func() {}, nil
	}
	if ref != store.UserID && !hexID.MatchString(ref) {
		return nil, "", nil, fmt.Errorf("%w: with --cluster, give the agent's id (32 hex characters), not %q", errUnknownAgent, ref)
	}
	// A reader writes no entry: the servers' fsync setting does not matter
	// (a plain user cannot read it), so it is not required.
	st, done, err := openClusterStore(ctx, cluster, "", true)
	if err != nil {
		return nil, "", nil, err
	}
	return st, ref, done, nil
}

// exportLog writes id's log to w as SPEC 3 lines and returns how many.
func exportLog(ctx context.Context, st store.Store, id string, w io.Writer) (int, error) {
	r, err := st.Read(ctx, id, 0, 0)
	if err != nil {
		return 0, fmt.Errorf("reading the log of %s: %w", id, err)
	}
	defer r.Close()
	n := 0
	for {
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("reading the log of %s after %d entries: %w", id, n, err)
		}
		line, err := eventlog.EncodeLine(e.Seq, e.TS, eventlog.Record{Event: e.Event, Data: e.Data})
		if err != nil {
			return n, fmt.Errorf("encoding entry %d of %s: %w", e.Seq, id, err)
		}
		if _, err := w.Write(line); err != nil {
			return n, err
		}
		n++
	}
}
