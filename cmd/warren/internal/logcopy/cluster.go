//go:build !nocluster

package logcopy

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"

	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider/remote"
	"github.com/warren-dev/warren/store"
	"github.com/warren-dev/warren/store/jetstream"
	"github.com/warren-dev/warren/store/jetstream/natsembed"
	"github.com/warren-dev/warren/store/local"
)

// The cluster side of export and migrate: the only file of the binary
// that links the NATS client (a -tags nocluster build has nocluster.go).

// openClusterStore connects to the NATS cluster at url and opens the
// store there (node names the claims it takes; "" for a reader). It signs
// in with the daemon's key in keysFile (a node's workers.json; "": the
// home's) when it holds one: a daemon's embedded servers let in no one
// else (docs/WORKERS.md).
func openClusterStore(ctx context.Context, home, keysFile, url, node string, lazy bool) (*jetstream.Store, func(), error) {
	if keysFile == "" {
		keysFile = filepath.Join(home, remote.KeysFile)
	}
	keys, err := remote.LoadKeys(faultfs.OS{}, keysFile)
	if err != nil {
		return nil, nil, err
	}
	nc, err := natsembed.Connect(url, keys.Daemon)
	if err != nil {
		return nil, nil, fmt.Errorf("connecting to %s: %w", url, err)
	}
	st, err := jetstream.New(ctx, jetstream.Options{Conn: nc, Node: node, UnsafeLazyFsync: lazy})
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return st, func() { _ = st.Close(); nc.Close() }, nil
}

// OpenReader opens the store of the NATS cluster at url to read logs,
// signing in with the daemon's key in keysFile ("": home's). A
// reader writes no entry: the servers' fsync setting does not matter (a
// plain user cannot read it), so it is not required.
func OpenReader(ctx context.Context, home, keysFile, url string) (store.Store, func(), error) {
	st, done, err := openClusterStore(ctx, home, keysFile, url, "", true)
	if err != nil {
		return nil, nil, err
	}
	return st, done, nil
}

// Migrate copies the stopped home into the cluster at url, verified,
// signing in with the daemon's key in keysFile ("": the home's).
func Migrate(ctx context.Context, home, keysFile, url string, lazy bool) (logs, entries int, err error) {
	js, done, err := openClusterStore(ctx, home, keysFile, url, "warren-migrate", lazy)
	if err != nil {
		return 0, 0, err
	}
	defer done()
	return migrate(ctx, local.New(local.Options{FS: faultfs.OS{}, Home: home}), js)
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
		n, err := Export(ctx, src, id, &want)
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
		if _, err := Export(ctx, dst, id, &got); err != nil {
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
