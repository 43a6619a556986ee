package daemon

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/store"
	"github.com/warren-dev/warren/store/jetstream"
	"github.com/warren-dev/warren/store/local"
)

// ClusterOptions selects where a daemon keeps its logs. The zero value is
// the local home (store/local): no NATS code runs.
type ClusterOptions struct {
	// URL is an external NATS cluster (nats://host:port[,...]).
	URL string
	// Embedded runs a NATS server in the daemon, data under <home>/nats;
	// Routes are the other servers' cluster URLs (nats://host:port).
	Embedded    bool
	Name        string // the embedded server's name (default: the host's)
	Port        int    // client port of the embedded server (0: 4222)
	ClusterPort int    // route port of the embedded server (0: 6222)
	Routes      []string
	// UnsafeLazyFsync accepts servers that do not fsync every write.
	UnsafeLazyFsync bool
	// Replicas of the stream (0: 1, or 3 with routes).
	Replicas int
}

func (o ClusterOptions) enabled() bool { return o.URL != "" || o.Embedded }

// openStore returns the store the daemon runs on and a function that
// closes it (and what it started).
func openStore(ctx context.Context, opts Options, fsys faultfs.FS, home string, logger hclog.Logger, bootID string) (store.Store, func(), error) {
	co := opts.Cluster
	if !co.enabled() {
		st := local.New(local.Options{FS: fsys, Home: home, Logger: logger.Named("eventlog"),
			Files: eventlog.NewFiles(DefaultMaxOpenLogs)})
		return st, func() {}, nil
	}
	var embedded []*server.Server
	url := co.URL
	var stopServer func()
	if co.Embedded {
		if err := validRoutes(co.Routes); err != nil {
			return nil, nil, err
		}
		eo := jetstream.EmbedOptions{Name: co.Name, Dir: filepath.Join(home, "nats"), Port: co.Port,
			Routes: co.Routes, UnsafeLazyFsync: co.UnsafeLazyFsync}
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
		srv, err := jetstream.Embed(eo)
		if err != nil {
			return nil, nil, fmt.Errorf("starting the embedded NATS server (--cluster-embedded): %w", err)
		}
		embedded = []*server.Server{srv}
		stopServer = func() { srv.Shutdown(); srv.WaitForShutdown() }
		if url == "" {
			url = srv.ClientURL()
		}
	}
	fail := func(err error) (store.Store, func(), error) {
		if stopServer != nil {
			stopServer()
		}
		return nil, nil, err
	}
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		return fail(fmt.Errorf("connecting to the NATS cluster %s: %w", url, err))
	}
	replicas := co.Replicas
	if replicas == 0 {
		replicas = 1
		if len(co.Routes) > 0 {
			replicas = 3
		}
	}
	node := co.Name
	if node == "" {
		node = filepath.Base(home)
	}
	st, err := jetstream.New(ctx, jetstream.Options{Conn: nc, Replicas: replicas, Node: node, BootID: bootID,
		Embedded: embedded, UnsafeLazyFsync: co.UnsafeLazyFsync, Logger: logger.Named("jetstream")})
	if err != nil {
		nc.Close()
		return fail(fmt.Errorf("%w; pass --unsafe-lazy-fsync only if losing acknowledged writes in a power cut is acceptable", err))
	}
	return st, func() {
		_ = st.Close()
		nc.Close()
		if stopServer != nil {
			stopServer()
		}
	}, nil
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
