package tests

import (
	"context"
	"fmt"
	"maps"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warren-dev/warren/protocol"
)

// routeProxy carries every route to one node: its explicit routes point
// here and so does its advertised cluster address, so that routes found
// by gossip come here too (NATS routes to a peer's advertised address
// when it hears of it before its configured route is up). It reads the
// soliciting server's name from the route handshake (its INFO), so each
// connection is known by both its ends, and cut nodes' connections are
// stalled both ways: a partition, with the processes running.
type routeProxy struct {
	ln     net.Listener
	target string // the node's route listener
	node   string // the node's name

	mu      sync.Mutex
	changed *sync.Cond
	cut     map[string]bool
	conns   []net.Conn
}

func newRouteProxy(t *testing.T, node, target string) *routeProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &routeProxy{ln: ln, target: target, node: node, cut: map[string]bool{}}
	p.changed = sync.NewCond(&p.mu)
	t.Cleanup(p.close)
	go p.serve()
	return p
}

func (p *routeProxy) addr() string { return p.ln.Addr().String() }

// routeName finds a server's name in a route handshake's INFO.
var routeName = regexp.MustCompile(`"server_name":"(n[0-9]+)"`)

func (p *routeProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, u)
		p.mu.Unlock()
		ends := &routeEnds{names: map[string]bool{p.node: true}}
		go p.pipe(c, u, ends, true)
		go p.pipe(u, c, ends, false)
	}
}

// routeEnds is the names of a connection's two servers, as far as known.
type routeEnds struct {
	mu    sync.Mutex
	names map[string]bool
	seen  []byte // what the soliciting side sent, until its name is in it
	known bool   // its name was found (or it sent 1 MB without one)
}

// pipe copies src to dst, holding each read while either end is cut.
// fromSolicitor marks the soliciting server's side, whose handshake names
// it.
func (p *routeProxy) pipe(src, dst net.Conn, ends *routeEnds, fromSolicitor bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			ends.mu.Lock()
			if fromSolicitor && !ends.known {
				ends.seen = append(ends.seen, buf[:n]...)
				for _, m := range routeName.FindAllSubmatch(ends.seen, -1) {
					ends.names[string(m[1])] = true
				}
				if len(ends.names) > 1 || len(ends.seen) > 1<<20 {
					ends.seen, ends.known = nil, true
				}
			}
			names := maps.Clone(ends.names)
			ends.mu.Unlock()
			p.mu.Lock()
			for p.isCut(names) {
				p.changed.Wait()
			}
			p.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			_ = dst.Close()
			return
		}
	}
}

// isCut reports whether a connection between these servers is stalled;
// p.mu is held.
func (p *routeProxy) isCut(names map[string]bool) bool {
	for n := range names {
		if p.cut[n] {
			return true
		}
	}
	return false
}

// setCut cuts node off (true) or lets its traffic flow again.
func (p *routeProxy) setCut(node string, cut bool) {
	p.mu.Lock()
	p.cut[node] = cut
	p.changed.Broadcast()
	p.mu.Unlock()
}

func (p *routeProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	p.cut = map[string]bool{}
	p.changed.Broadcast()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
}

// startCluster3Proxied is startCluster3 with every route to node i
// through proxies[i] (its configured routes and its advertised address).
func startCluster3Proxied(t *testing.T, extra ...string) (*cluster3, []*routeProxy) {
	t.Helper()
	var proxies []*routeProxy
	c := launchCluster3(t, func(c *cluster3, i int) []string {
		nodes := len(c.ds)
		if proxies == nil {
			for j := range nodes {
				proxies = append(proxies, newRouteProxy(t, fmt.Sprintf("n%d", j+1), fmt.Sprintf("127.0.0.1:%d", c.ports[nodes+j])))
			}
		}
		var others []string
		for j := range nodes {
			if j != i {
				others = append(others, "nats://"+proxies[j].addr())
			}
		}
		return []string{"--nats-advertise", proxies[i].addr(), "--routes", strings.Join(others, ",")}
	}, extra...)
	return c, proxies
}

// settled waits until exactly one daemon is active and the others stand
// by naming it, and returns it; it fails with every daemon's log past
// limit.
func (c *cluster3) settled(limit time.Duration) int {
	c.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		active, named := -1, 0
		for i, d := range c.ds {
			switch role(d) {
			case "active":
				if active >= 0 {
					active = -2 // two at once: wait (a lease is about to be found lost)
				} else if active == -1 {
					active = i
				}
			}
		}
		if active >= 0 {
			want := fmt.Sprintf("n%d", active+1)
			for i, d := range c.ds {
				if i != active && clusterField(d, "active_node") == want {
					named++
				}
			}
			if named == len(c.ds)-1 {
				return active
			}
		}
		if time.Now().After(deadline) {
			var out strings.Builder
			for i, d := range c.ds {
				fmt.Fprintf(&out, "--- n%d (role %q):\n%s\n", i+1, role(d), d.Output())
			}
			c.t.Fatalf("no single active daemon named by the others within %v\n%s", limit, out.String())
		}
		time.Sleep(200 * time.Millisecond) // no event says "stood by"
	}
}

// cut stalls (true) or restores (false) every route of node n, both ways.
func cut(proxies []*routeProxy, n int, stalled bool) {
	for _, p := range proxies {
		p.setCut(fmt.Sprintf("n%d", n+1), stalled)
	}
}

// TestServingDaemonPartitioned cuts the serving daemon's NATS server off
// from the other two (its routes stalled: a partition, not a crash; the
// daemon and its socket go on running). The majority's standby takes the
// team over once the leases lapse, while the cut-off daemon answers no
// turn (it cannot tell a partition from an election: its turns pause past
// its leases' expiry and its appends go unanswered). When the routes come
// back, the old daemon finds the other claim and stands by, naming the
// new active node: one daemon serves (on a loaded machine the heal's
// re-election may outlast the new holder's short lease, and the old one
// may claim the team again: still one), the team is whole, nothing
// corrupt, and what was acknowledged before the cut is there.
func TestServingDaemonPartitioned(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: three daemons with embedded NATS servers behind route proxies; run without -short")
	}
	c, proxies := startCluster3Proxied(t, "--owner-ttl", "3s")
	active, a, _, lead := c.activeAgent("lead")
	spawnW1(t, a, lead)
	if res := a.callN("agent.send", map[string]any{"agent_id": lead, "message": "before the cut"}); !strings.Contains(str(res["response"]), "before the cut") {
		t.Fatalf("send before the cut: %v", res)
	}
	c.current()

	cut(proxies, active, true)
	start := time.Now()
	next := serving(t, c.ds, c.exits, active, 2*time.Minute)
	b := c.ds[next]
	t.Logf("n%d took over %.1f s after n%d was cut off", next+1, time.Since(start).Seconds(), active+1)

	// The cut-off daemon does not answer a turn: it holds leases it
	// cannot renew, so its turns pause, and the appends a turn needs
	// reach no quorum.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	res, err := protocol.CallJSON(ctx, a.Sock, "agent.send", map[string]any{"agent_id": lead, "message": "on the minority"})
	cancel()
	if err == nil && strings.Contains(str(res["response"]), "on the minority") {
		t.Fatalf("the cut-off daemon answered a turn while another served: %v", res)
	}

	// The majority serves the whole team.
	d := probe(t, b, lead, start, 2*time.Minute)
	t.Logf("the team answered on n%d %.1f s after the cut", next+1, d.Seconds())

	cut(proxies, active, false)
	healed := time.Now()
	final := c.settled(2 * time.Minute)
	if !strings.Contains(a.Output(), "stops serving and stands by") {
		t.Fatalf("the cut-off daemon never found the other claim and stood by:\n%s", a.Output())
	}
	t.Logf("n%d stood by; n%d serves %.1f s after the routes came back", active+1, final+1, time.Since(healed).Seconds())
	if final != next {
		// The re-election the heal causes can outlast a 3 s lease on a
		// loaded machine; the old daemon may then claim the inbox
		// again, and the new one stands by: still one daemon serving.
		t.Logf("n%d's lease lapsed after the heal and n%d claimed the team again", next+1, final+1)
	}
	b = c.ds[final]
	c.healthy(b, time.Minute)

	// What was acknowledged before the cut is in the lead's log.
	log := b.callN("agent.log", map[string]any{"agent_id": lead})
	if !strings.Contains(fmt.Sprint(log), "before the cut") {
		t.Fatalf("the message acknowledged before the cut is missing from the lead's log: %v", log)
	}
	res = b.callN("agent.send", map[string]any{"agent_id": lead, "message": "after the heal"})
	if !strings.Contains(str(res["response"]), "after the heal") {
		t.Fatalf("send after the heal: %v", res)
	}
}
