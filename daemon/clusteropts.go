package daemon

import (
	"errors"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/store"
	"github.com/warren-dev/warren/store/local"
)

// ErrNoCluster is returned for cluster options by a binary built with
// -tags nocluster (no NATS server or client linked in).
var ErrNoCluster = errors.New("this binary was built without cluster support (-tags nocluster); use a default build of warren for --cluster, --cluster-embedded, export --cluster and migrate")

// ClusterOptions selects where a daemon keeps its logs. The zero value is
// the local home (store/local): no NATS code runs.
type ClusterOptions struct {
	// URL is an external NATS cluster (nats://host:port[,...]).
	URL string
	// Embedded runs a NATS server in the daemon, data under <home>/nats;
	// Routes are the other servers' cluster URLs (nats://host:port).
	Embedded  bool
	Name      string // the embedded server's name (default: the host's)
	Host      string // listen address of the embedded server (default 127.0.0.1)
	Advertise string // host:port the other servers route to (default: the listener's)
	Port      int    // client port of the embedded server (0: 4222)
	// TLSCert, TLSKey and TLSCA turn on NATS's TLS: mutual TLS on the
	// embedded server's client listener and routes, and on this daemon's
	// own connection (with --cluster too). All three, or none.
	TLSCert, TLSKey, TLSCA string
	ClusterPort            int // route port of the embedded server (0: 6222)
	Routes                 []string
	// UnsafeLazyFsync accepts servers that do not fsync every write.
	UnsafeLazyFsync bool
	// Replicas of the stream (0: 3 with routes, else an existing stream's
	// or 1).
	Replicas int
	// OwnerTTL is how long an agent's claim outlives its daemon (0: the
	// store's default, jetstream.DefaultOwnerTTL).
	OwnerTTL time.Duration
}

// MinOwnerTTL is the shortest --owner-ttl a daemon takes: a lease is
// renewed every third of it, and a renewal may take a second to answer.
// A TTL shorter than a NATS leader election (up to about 9 s) loses no
// lease (a renewal rides the election out), but pauses the agents'
// turns and tools from the lease's expiry to the next renewal.
const MinOwnerTTL = 2 * time.Second

// storeParts is what openStore opens: the store, the function that
// closes it (and what it started), and the placement of sessions on
// remote workers (nil without a cluster: engine.CoreOptions.Place).
type storeParts struct {
	st    store.Store
	close func()
	place func(name string, local provider.Provider, labels map[string]string) provider.Provider
	// workers lists the remote workers for daemon.status (nil without a
	// cluster).
	workers func() []map[string]any
}

// nodeName is the daemon's node name in a cluster: --node, or the home's
// directory name.
func nodeName(o ClusterOptions, home string) string {
	if o.Name != "" {
		return o.Name
	}
	return filepath.Base(home)
}

func (o ClusterOptions) enabled() bool { return o.URL != "" || o.Embedded }

// CheckCluster refuses cluster options this binary cannot honour: any of
// them in a build with -tags nocluster (ErrNoCluster).
func CheckCluster(o ClusterOptions) error {
	if o.enabled() && !ClusterSupport {
		return ErrNoCluster
	}
	return nil
}

// openLocalStore is the store of a daemon without a cluster: the home,
// with at most maxOpenLogs event logs holding open files (fileLimit), and
// the fsyncs of logs written at the same moment shared (eventlog.Syncer);
// the function returned closes the Syncer's handles, once every Core is
// closed.
func openLocalStore(fsys faultfs.FS, home string, logger hclog.Logger, maxOpenLogs int) (store.Store, func()) {
	syncer := eventlog.NewSyncer(fsys)
	st := local.New(local.Options{FS: fsys, Home: home, Logger: logger.Named("eventlog"),
		Files: eventlog.NewFiles(maxOpenLogs), Syncer: syncer})
	return st, func() {
		if err := syncer.Close(); err != nil {
			logger.Warn("closing the event logs' filesystem handles", "error", err)
		}
	}
}
