//go:build !nocluster

package daemon

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider/remote"
	"github.com/warren-dev/warren/store/jetstream"
	"github.com/warren-dev/warren/store/jetstream/natsembed"
)

// ClusterSupport says whether this binary links the NATS server and
// client (false: built with -tags nocluster).
const ClusterSupport = true

// openStore returns the store the daemon runs on and a function that
// closes it (and what it started).
func openStore(ctx context.Context, opts Options, fsys faultfs.FS, home string, logger hclog.Logger, bootID string, maxOpenLogs int) (storeParts, error) {
	co := opts.Cluster
	if !co.enabled() {
		st, closeSt := openLocalStore(fsys, home, logger, maxOpenLogs)
		return storeParts{st: st, close: closeSt}, nil
	}
	var embedded []*server.Server
	url := co.URL
	var tlsFiles *natsembed.TLSFiles
	connOpts := []nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(100 * time.Millisecond), nats.IgnoreAuthErrorAbort()}
	if co.TLSCert != "" || co.TLSKey != "" || co.TLSCA != "" {
		tlsFiles = &natsembed.TLSFiles{Cert: co.TLSCert, Key: co.TLSKey, CA: co.TLSCA}
		if err := tlsFiles.Check(); err != nil {
			return storeParts{}, fmt.Errorf("--nats-tls-cert, --nats-tls-key, --nats-tls-ca: %w", err)
		}
		connOpts = append(connOpts, tlsFiles.ClientOptions()...)
	}
	keysPath := filepath.Join(home, remote.KeysFile)
	keys := func() (remote.Keys, error) { return remote.LoadKeys(fsys, keysPath) }
	var key ed25519.PrivateKey // the daemon's NATS user (natsUsers), when it has one
	var stopServer func()
	if co.Embedded {
		srv, k, stop, err := startEmbedded(co, fsys, home, keys, tlsFiles, logger)
		if err != nil {
			return storeParts{}, err
		}
		key, embedded, stopServer = k, []*server.Server{srv}, stop
		if url == "" {
			// The daemon's own server is in its process: no socket
			// between them.
			url = srv.ClientURL()
			connOpts = append(connOpts, nats.InProcessServer(srv))
		}
	}
	fail := func(err error) (storeParts, error) {
		if stopServer != nil {
			stopServer()
		}
		return storeParts{}, err
	}
	if key == nil { // --cluster URL: the home's key, if it has one (a node's workers.json)
		k, err := keys()
		if err != nil {
			return fail(err)
		}
		key = k.Daemon
	}
	nc, err := natsembed.Connect(url, key, connOpts...)
	if err != nil {
		return fail(fmt.Errorf("connecting to the NATS cluster %s: %w", url, err))
	}
	// Zero keeps an existing stream's replicas (1 for a new one): a
	// daemon joining with --cluster must not rescale the stream.
	replicas := co.Replicas
	if replicas == 0 && len(co.Routes) > 0 {
		replicas = 3
	}
	node := nodeName(co, home)
	st, err := newClusterStore(ctx, jetstream.Options{Conn: nc, Replicas: replicas, Node: node, BootID: bootID,
		Embedded: embedded, OwnerTTL: co.OwnerTTL, UnsafeLazyFsync: co.UnsafeLazyFsync, Logger: logger.Named("jetstream")}, logger)
	if err != nil {
		nc.Close()
		return fail(err)
	}
	workers, err := remote.NewDirectory(ctx, remote.DirectoryOptions{Conn: nc, Daemon: bootID, Keys: keys,
		Logger: logger.Named("workers")})
	if err != nil {
		_ = st.Close()
		nc.Close()
		return fail(err)
	}
	return storeParts{st: st, close: func() {
		workers.Close()
		_ = st.Close()
		nc.Close()
		if stopServer != nil {
			stopServer()
		}
	}, place: workers.Wrap, workers: func() []map[string]any { return workerList(workers.Workers()) }}, nil
}

// startEmbedded starts the daemon's own NATS server
// (--cluster-embedded) with the daemon's key, made at its first start
// (remote.DaemonKey): the server lets in that key and the workers'
// (natsUsers), and routes with a password made from it. stop stops it
// and its watch of the keys (watchKeys).
func startEmbedded(co ClusterOptions, fsys faultfs.FS, home string, keys func() (remote.Keys, error), tlsFiles *natsembed.TLSFiles, logger hclog.Logger) (srv *server.Server, key ed25519.PrivateKey, stop func(), err error) {
	if err := validRoutes(co.Routes); err != nil {
		return nil, nil, nil, err
	}
	keysPath := filepath.Join(home, remote.KeysFile)
	key, made, err := remote.DaemonKey(fsys, keysPath)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("the daemon's key for its NATS server: %w", err)
	}
	if made && len(co.Routes) > 0 {
		// The servers of a cluster route to each other only with the
		// same key (natsembed.RoutePassword).
		logger.Warn("made this node's cluster key; every node needs the same one: if other nodes already run, stop this daemon, copy workers.json from one of them and start it again; if this is the first node, copy this file to the others before their first start",
			"file", keysPath)
	}
	users := natsUsers(key, keys, logger.Named("nats"))
	eo := natsembed.Options{Name: co.Name, Dir: filepath.Join(home, "nats"), Host: co.Host, Advertise: co.Advertise, Port: co.Port, TLS: tlsFiles,
		Routes: co.Routes, UnsafeLazyFsync: co.UnsafeLazyFsync, Users: users,
		RouteSecret: natsembed.RoutePassword(key), Logger: logger.Named("nats")}
	if eo.Port == 0 {
		eo.Port = 4222
	}
	if len(co.Routes) > 0 {
		eo.ClusterName = "warren"
		eo.ClusterPort = co.ClusterPort
		if eo.ClusterPort == 0 {
			eo.ClusterPort = 6222
		}
	}
	srv, err = natsembed.Start(eo)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("starting the embedded NATS server (--cluster-embedded): %w", err)
	}
	stopWatch := watchKeys(srv, fsys, keysPath, key, logger.Named("nats"))
	return srv, key, func() { stopWatch(); srv.Shutdown(); srv.WaitForShutdown() }, nil
}

// workerList is the workers block of daemon.status: each live worker's
// id, boot, labels and pools (size, and the daemon's sessions there).
func workerList(ws []remote.Worker) []map[string]any {
	out := make([]map[string]any, 0, len(ws))
	for _, w := range ws {
		pools := map[string]any{}
		for name, p := range w.Pools {
			pools[name] = map[string]any{"size": p.Size, "placed": w.Placed[name]}
		}
		labels := w.Labels
		if labels == nil {
			labels = map[string]string{}
		}
		out = append(out, map[string]any{"id": w.ID, "boot": w.Boot, "labels": labels, "pools": pools})
	}
	return out
}

func validRoutes(routes []string) error {
	for _, r := range routes {
		u, err := url.Parse(r)
		if err != nil || u.Scheme != "nats" || u.Host == "" {
			return fmt.Errorf("route %q: give the other servers' cluster addresses as nats://host:port", r)
		}
	}
	return nil
}

// clusterStartWait bounds how long a starting daemon waits for its
// cluster's JetStream (a meta leader, the stream's replicas): the servers
// of a new cluster elect one only once a majority of them runs, so the
// first daemon of three started one after another waits for the second.
const clusterStartWait = 2 * time.Minute

// newClusterStore opens the JetStream store, retrying while the cluster
// cannot serve yet. A server that does not fsync every write is refused
// at once.
func newClusterStore(ctx context.Context, o jetstream.Options, logger hclog.Logger) (*jetstream.Store, error) {
	start := time.Now()
	var noted time.Time
	for {
		st, err := jetstream.New(ctx, o)
		if err == nil {
			return st, nil
		}
		if errors.Is(err, jetstream.ErrLazyFsync) || errors.Is(err, jetstream.ErrSyncUnknown) {
			return nil, fmt.Errorf("%w; pass --unsafe-lazy-fsync only if losing acknowledged writes in a power cut is acceptable", err)
		}
		if time.Since(start) > clusterStartWait {
			return nil, fmt.Errorf("the NATS cluster did not serve JetStream within %s (are a majority of its servers up and routed?): %w", clusterStartWait, err)
		}
		if time.Since(noted) > 10*time.Second {
			logger.Info("waiting for the NATS cluster's JetStream", "err", err)
			noted = time.Now()
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond): // the cluster has no event a client can wait for
		}
	}
}
