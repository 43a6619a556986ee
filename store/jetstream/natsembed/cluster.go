package natsembed

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// ClusterOptions configures StartCluster.
type ClusterOptions struct {
	// Nodes is the number of servers (named n1, n2, ...).
	Nodes int
	// Dir returns the data directory of server i (0-based).
	Dir func(i int) string
	// StartTimeout bounds each server's start (0: Embed's default).
	StartTimeout time.Duration
	// Attempts is how many times the whole start is tried with fresh
	// ports (0: 3).
	Attempts int
}

// StartCluster starts o.Nodes embedded servers on loopback, each with
// a route to every other, on free ports: the cluster the tests and the
// benchmarks of one machine run. A route port is picked by listening on
// port 0 and closing the listener before the server binds it, so another
// process may take it meanwhile (the server then never gets ready); the
// whole start is then tried again on fresh ports, up to o.Attempts times.
// The caller shuts the servers down.
func StartCluster(o ClusterOptions) ([]*server.Server, error) {
	attempts := o.Attempts
	if attempts == 0 {
		attempts = 3
	}
	var errs []error
	for range attempts {
		srvs, err := startClusterOnce(o)
		if err == nil {
			return srvs, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("natsembed: a local cluster of %d servers did not start in %d attempts: %w", o.Nodes, attempts, errors.Join(errs...))
}

func startClusterOnce(o ClusterOptions) ([]*server.Server, error) {
	ports, err := FreeLoopbackPorts(o.Nodes)
	if err != nil {
		return nil, err
	}
	routes := make([]string, len(ports))
	for i, p := range ports {
		routes[i] = fmt.Sprintf("nats://127.0.0.1:%d", p)
	}
	srvs := make([]*server.Server, o.Nodes)
	errc := make(chan error, o.Nodes)
	for i := range srvs {
		go func(i int) {
			srv, err := Start(Options{Name: fmt.Sprintf("n%d", i+1), Dir: o.Dir(i), Port: -1, Host: "127.0.0.1",
				ClusterName: "warren", ClusterPort: ports[i], Routes: routes, StartTimeout: o.StartTimeout})
			srvs[i] = srv
			errc <- err
		}(i)
	}
	var errs []error
	for range srvs {
		if err := <-errc; err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		for _, s := range srvs {
			if s != nil {
				s.Shutdown()
				s.WaitForShutdown()
			}
		}
		return nil, errors.Join(errs...)
	}
	return srvs, nil
}

// FreeLoopbackPorts returns n distinct ports free on 127.0.0.1 a moment ago.
func FreeLoopbackPorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("natsembed: picking a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
