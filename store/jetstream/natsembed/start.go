package natsembed

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/nats-io/nats-server/v2/server"
)

// Options configures a NATS server run inside the warren process
// (`warren daemon start --cluster-embedded`, and the tests).
type Options struct {
	// Name is the server's name (unique within a cluster).
	Name string
	// Dir holds JetStream's files.
	Dir string
	// Host and Port are the client listener, Host the route listener too
	// (default 127.0.0.1: give the machine's address, or 0.0.0.0, for a
	// cluster across machines); Port -1 picks a free one.
	Host string
	Port int
	// Advertise is the host:port the other servers are told to route to
	// (default: the listener's), for a server behind NAT or listening on
	// 0.0.0.0.
	Advertise string
	// TLS, when set, is NATS's own TLS on the client listener and the
	// routes, both ways verified against TLS.CA (mutual TLS).
	TLS *TLSFiles
	// ClusterName, ClusterPort (-1: a free one) and Routes make the server
	// one node of a cluster; leave ClusterName empty for a single node.
	ClusterName string
	ClusterPort int
	Routes      []string
	// UnsafeLazyFsync runs JetStream with the server's default background
	// flush (every 2 minutes) instead of fsync on every write. Store
	// refuses such a server unless its own UnsafeLazyFsync is set.
	UnsafeLazyFsync bool
	// StartTimeout bounds the wait for the server to accept clients
	// (default 10 s).
	StartTimeout time.Duration
	// RouteSecret, when set, is the password every route must present
	// (user "warren"), and the one this server presents on the routes it
	// makes: the servers of one cluster share it; a server without it
	// cannot join. Without it any server that reaches the route port (and
	// passes TLS) joins, and may read and write everything.
	RouteSecret string `json:",omitempty"`
	// Logger, when set, gets the server's warnings and errors (a route
	// or a client refused, a route that cannot be made), each kind at
	// most once per minute; its notices go at debug level.
	Logger hclog.Logger `json:"-"`
	// Users, when set, is who may connect as a client and with which
	// permissions (auth.go): every client must sign in with an nkey.
	// Nil lets any client in with every permission.
	Users Users `json:"-"`
}

// routeUser is the user a route signs in as (Options.RouteSecret).
const routeUser = "warren"

// Embed starts a NATS server with JetStream in this process, with
// sync_interval "always" (SyncAlways) unless o.UnsafeLazyFsync. It returns
// once the server accepts clients; stop it with Shutdown and
// WaitForShutdown.
func Start(o Options) (*server.Server, error) {
	if o.Dir == "" {
		return nil, errors.New("natsembed: embedded server needs a directory for its files (Options.Dir)")
	}
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	opts := &server.Options{
		ServerName: o.Name,
		Host:       o.Host,
		Port:       o.Port,
		JetStream:  true,
		StoreDir:   o.Dir,
		SyncAlways: !o.UnsafeLazyFsync,
		NoSigs:     true,
		NoLog:      true,
	}
	if o.ClusterName != "" {
		opts.Cluster = server.ClusterOpts{Name: o.ClusterName, Host: o.Host, Port: o.ClusterPort, Advertise: o.Advertise}
		if o.RouteSecret != "" {
			opts.Cluster.Username, opts.Cluster.Password = routeUser, o.RouteSecret
		}
		for _, r := range o.Routes {
			u, err := url.Parse(r)
			if err != nil {
				return nil, fmt.Errorf("natsembed: route %q: %w", r, err)
			}
			if o.RouteSecret != "" {
				u.User = url.UserPassword(routeUser, o.RouteSecret)
			}
			opts.Routes = append(opts.Routes, u)
		}
	}
	if o.Users != nil {
		opts.CustomClientAuthentication = nkeyAuth{users: o.Users}
		opts.AlwaysEnableNonce = true
	}
	if o.TLS != nil {
		if err := o.TLS.apply(opts); err != nil {
			return nil, err
		}
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("natsembed: embedded server: %w", err)
	}
	if o.Logger != nil {
		s.SetLoggerV2(newServerLog(o.Logger), false, false, false)
	}
	go s.Start()
	wait := o.StartTimeout
	if wait == 0 {
		wait = 10 * time.Second
	}
	if !s.ReadyForConnections(wait) {
		s.Shutdown()
		return nil, fmt.Errorf("natsembed: embedded server %q not ready after %s", o.Name, wait)
	}
	return s, nil
}
