package tests

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/warren-dev/warren/protocol"
	"github.com/warren-dev/warren/store/jetstream"
)

// The cluster through NATS leader changes and a paused daemon (issue 37).
// Three `--cluster-embedded` daemons on loopback, one serving, two
// standing by. What is asserted is service, not only safety: the team
// answered again by the same daemon, no agent degraded or corrupt, one
// daemon active.

// cluster3 is three embedded daemons routed to each other.
type cluster3 struct {
	t     *testing.T
	ds    []*testDaemon
	exits []chan struct{}
	ports []int // client ports, then route ports
	nc    *nats.Conn
	js    natsjs.JetStream
}

// ownersStream is the owners bucket's stream.
const ownersStream = "KV_" + jetstream.OwnersBucket

func startCluster3(t *testing.T, extra ...string) *cluster3 {
	t.Helper()
	return launchCluster3(t, func(c *cluster3, i int) []string {
		var others []string
		for j := range c.ds {
			if j != i {
				others = append(others, fmt.Sprintf("nats://127.0.0.1:%d", c.ports[len(c.ds)+j]))
			}
		}
		return []string{"--routes", strings.Join(others, ",")}
	}, extra...)
}

// launchCluster3 starts three embedded daemons, node i's routing flags
// given by routing(c, i) (c.ports is set), and connects the test to
// their servers.
func launchCluster3(t *testing.T, routing func(c *cluster3, i int) []string, extra ...string) *cluster3 {
	t.Helper()
	const nodes = 3
	c := &cluster3{t: t, ports: freePorts(t, 2*nodes), ds: make([]*testDaemon, nodes), exits: make([]chan struct{}, nodes)}
	for i := range c.ds {
		d := newTestDaemon(t, modeBinary)
		d.args = append(append([]string{"--cluster-embedded", "--node", fmt.Sprintf("n%d", i+1), "--nats-port", strconv.Itoa(c.ports[i]),
			"--nats-cluster-port", strconv.Itoa(c.ports[nodes+i])}, routing(c, i)...), extra...)
		c.ds[i] = d
	}
	var homes []string
	for _, d := range c.ds {
		homes = append(homes, d.Home)
	}
	key := sharedDaemonKey(t, homes...)
	for i, d := range c.ds {
		ex, err := d.launch()
		if err != nil {
			t.Fatal(err)
		}
		c.exits[i] = ex
	}
	var urls []string
	for i := range nodes {
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", c.ports[i]))
	}
	nc := connectAsDaemon(t, key, strings.Join(urls, ","), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond), nats.RetryOnFailedConnect(true))
	t.Cleanup(nc.Close)
	c.nc = nc
	var err error
	if c.js, err = natsjs.New(nc); err != nil {
		t.Fatal(err)
	}
	return c
}

// activeAgent waits for the active daemon and creates a scripted agent
// name on it (the test agent script of helpers_proc_test.go).
func (c *cluster3) activeAgent(name string) (active int, a *testDaemon, script, id string) {
	c.t.Helper()
	active = serving(c.t, c.ds, c.exits, -1, 3*time.Minute)
	a = c.ds[active]
	script = writeScripts(c.t, a.dir)
	return active, a, script, a.createAgent(name, "scripted", script, "")
}

// spawnW1 has agent lead spawn a child w1 (echo) and checks it did.
func spawnW1(t *testing.T, a *testDaemon, lead string) {
	t.Helper()
	if res := a.callN("agent.send", map[string]any{"agent_id": lead, "message": "spawn w1 echo"}); !strings.Contains(str(res["response"]), "spawned: ") {
		t.Fatalf("spawn: %v", res)
	}
}

// leader names the server leading stream ("" when it cannot be read).
func (c *cluster3) leader(stream string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := c.js.Stream(ctx, stream)
	if err != nil || s.CachedInfo().Cluster == nil {
		return ""
	}
	return s.CachedInfo().Cluster.Leader
}

// stepdown asks stream's leader to step down, for preferred when given
// (what an operator, a rolling upgrade or NATS's own rebalancing does).
func (c *cluster3) stepdown(stream, preferred string) {
	c.t.Helper()
	body := []byte("{}")
	if preferred != "" {
		body, _ = json.Marshal(map[string]any{"placement": map[string]any{"preferred": preferred}})
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		m, err := c.nc.Request("$JS.API.STREAM.LEADER.STEPDOWN."+stream, body, 5*time.Second)
		if err == nil && !strings.Contains(string(m.Data), `"error"`) {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("stepdown of %s: %v %s", stream, err, msgData(m))
		}
		time.Sleep(200 * time.Millisecond) // a stream just elected may refuse a stepdown for a moment
	}
}

func msgData(m *nats.Msg) string {
	if m == nil {
		return ""
	}
	return string(m.Data)
}

// current waits until every stream the daemons use has a leader and
// every replica is current (the quorum can lose one more server).
func (c *cluster3) current() {
	c.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for _, name := range []string{jetstream.StreamName, ownersStream} {
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			s, err := c.js.Stream(ctx, name)
			cancel()
			if err == nil && s.CachedInfo().Cluster != nil && s.CachedInfo().Cluster.Leader != "" {
				ok := len(s.CachedInfo().Cluster.Replicas) == 2
				for _, r := range s.CachedInfo().Cluster.Replicas {
					ok = ok && r.Current && !r.Offline
				}
				if ok {
					break
				}
			}
			if time.Now().After(deadline) {
				c.t.Fatalf("stream %s: replicas not current within 2 minutes (%v)", name, err)
			}
			time.Sleep(100 * time.Millisecond) // the server has no event for "current"
		}
	}
}

// probe sends a turn to agent on d until one is answered, each send
// bounded by 30 s, and returns how long it took from start.
func probe(t *testing.T, d *testDaemon, agent string, start time.Time, limit time.Duration) time.Duration {
	t.Helper()
	deadline := start.Add(limit)
	var last error
	for n := 0; time.Now().Before(deadline); n++ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		msg := fmt.Sprintf("probe %d", n)
		res, err := protocol.CallJSON(ctx, d.Sock, "agent.send", map[string]any{"agent_id": agent, "message": msg})
		cancel()
		if err == nil && strings.Contains(str(res["response"]), msg) {
			return time.Since(start)
		}
		last = err
		time.Sleep(100 * time.Millisecond) // the next probe; no signal says the cluster is back
	}
	t.Fatalf("no probe turn answered by the serving daemon within %s of the leader change (last error %v)\n%s", limit, last, d.Output())
	return 0
}

// healthy asserts that d is the one active daemon and that none of its
// agents is degraded or corrupt, within limit.
func (c *cluster3) healthy(d *testDaemon, limit time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		var bad []string
		if r := role(d); r != "active" {
			bad = append(bad, "the serving daemon's role is "+strconv.Quote(r))
		}
		for i, o := range c.ds {
			if o != d && role(o) == "active" {
				bad = append(bad, fmt.Sprintf("n%d is active too", i+1))
			}
		}
		if len(bad) == 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			list, err := protocol.CallJSON(ctx, d.Sock, "agent.list", nil)
			cancel()
			if err != nil {
				bad = append(bad, "agent.list: "+err.Error())
			}
			bad = append(bad, unwell(list)...)
		}
		if len(bad) == 0 {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("not healthy %s after the leader change: %v\n%s", limit, bad, d.Output())
		}
		time.Sleep(200 * time.Millisecond) // agent.list has no wait
	}
}

// unwell lists the agents of an agent.list reply that are corrupt or
// degraded.
func unwell(list map[string]any) []string {
	var bad []string
	agents, _ := list["agents"].([]any)
	for _, a := range agents {
		m := a.(map[string]any)
		if s := str(m["status"]); s == "corrupt" || str(m["degraded"]) != "" {
			bad = append(bad, fmt.Sprintf("%s is %s %s", str(m["path"]), s, str(m["degraded"])))
		}
	}
	return bad
}

// TestLeaderStepdownKeepsTheTeamServed: graceful stepdowns of the log
// stream's leader and of the owners bucket's, no process killed (a
// rolling NATS upgrade does this), with a short TTL: the serving daemon
// answers a probe turn again each time, without a restart, and nothing is
// degraded. (It used to wedge the team 3 times of 3: the append lost in
// the election poisoned the log handle for good.)
func TestLeaderStepdownKeepsTheTeamServed(t *testing.T) {
	c := startCluster3(t, "--owner-ttl", "3s")
	active, a, script, agent := c.activeAgent("probe")
	a.createAgent("bystander", "scripted", script, "")
	c.current()
	for round := range 4 {
		stream := jetstream.StreamName
		if round%2 == 1 {
			stream = ownersStream
		}
		// Load while the leader changes: a turn in flight.
		inflight := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, err := protocol.CallJSON(ctx, a.Sock, "agent.send", map[string]any{"agent_id": agent, "message": "in flight"})
			inflight <- err
		}()
		before := c.leader(stream)
		start := time.Now()
		c.stepdown(stream, "")
		took := probe(t, a, agent, start, time.Minute)
		<-inflight // answered or refused (mid-turn), never left hanging
		t.Logf("round %d: %s leader %s stepped down (now %s); probe answered by n%d %.2f s later", round, stream, before, c.leader(stream), active+1, took.Seconds())
		c.healthy(a, 20*time.Second)
		c.current()
	}
}

// TestLeaderKillKeepsTheTeamServed: the log stream's leader is moved to a
// standby, which is killed (kill -9, its embedded server with it) under
// load; the serving daemon answers a probe turn again without a restart
// and no agent stays degraded. Then the same for the owners bucket's
// leader, once the killed node is back.
//
// The daemons run with the default --owner-ttl (10s), which the issue names
// for this case: no lease may be lost. With 3s, a killed node's elections
// on a loaded 2-core machine (CI beside other work) once outlasted the TTL
// and its grace, and a standby legitimately took the team over: failover,
// which TestPausedDaemonStandsBy and the torture cover, not this test's
// subject.
func TestLeaderKillKeepsTheTeamServed(t *testing.T) {
	c := startCluster3(t)
	active, a, _, agent := c.activeAgent("probe")
	c.current()
	for round, stream := range []string{jetstream.StreamName, ownersStream} {
		victim := (active + 1 + round) % 3
		name := fmt.Sprintf("n%d", victim+1)
		for try := 0; c.leader(stream) != name; try++ {
			if try == 20 {
				t.Fatalf("%s's leader stays %s; wanted %s", stream, c.leader(stream), name)
			}
			c.stepdown(stream, name)
			time.Sleep(500 * time.Millisecond) // the election settles; no event for it
		}
		go func() { // load: a turn in flight when the leader dies
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, _ = protocol.CallJSON(ctx, a.Sock, "agent.send", map[string]any{"agent_id": agent, "message": "in flight"})
		}()
		start := time.Now()
		c.ds[victim].Kill()
		took := probe(t, a, agent, start, 90*time.Second)
		t.Logf("round %d: killed %s, the leader of %s; probe answered by n%d %.2f s later", round, name, stream, active+1, took.Seconds())
		c.healthy(a, 20*time.Second)
		ex, err := c.ds[victim].launch()
		if err != nil {
			t.Fatal(err)
		}
		c.exits[victim] = ex
		c.current()
	}
}

// TestPausedDaemonStandsBy: the serving daemon is paused (SIGSTOP) past
// its TTL, a standby takes the team over; resumed (SIGCONT), the old one
// finds its claims taken, stops serving and stands by: exactly one
// daemon serves, the other answers as a standby naming the active node,
// and nothing is listed corrupt.
func TestPausedDaemonStandsBy(t *testing.T) {
	c := startCluster3(t, "--owner-ttl", "3s")
	active, a, _, lead := c.activeAgent("lead")
	spawnW1(t, a, lead)
	c.current()
	a.Signal(syscall.SIGSTOP)
	next := serving(t, c.ds, c.exits, active, 2*time.Minute)
	b := c.ds[next]
	a.Signal(syscall.SIGCONT)
	deadline := time.Now().Add(time.Minute)
	for role(a) != "standby" {
		if time.Now().After(deadline) {
			t.Fatalf("a minute after SIGCONT the paused daemon's role is %q, want standby\n%s", role(a), a.Output())
		}
		time.Sleep(200 * time.Millisecond) // no event says "stood by"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := protocol.CallJSON(ctx, a.Sock, "daemon.status", nil)
	if err != nil {
		t.Fatal(err)
	}
	if cl, _ := st["cluster"].(map[string]any); str(cl["active_node"]) != fmt.Sprintf("n%d", next+1) {
		t.Fatalf("the standby names %v as the active node, want n%d", cl, next+1)
	}
	_, err = protocol.CallJSON(ctx, a.Sock, "agent.list", nil)
	if err == nil || !strings.Contains(err.Error(), "stands by") || !strings.Contains(err.Error(), fmt.Sprintf("node n%d", next+1)) {
		t.Fatalf("agent.list on the standby: %v, want code 6 naming node n%d", err, next+1)
	}
	// The team is whole on the new active daemon, nothing corrupt.
	deadline = time.Now().Add(time.Minute)
	for {
		paths := map[string]string{}
		for _, e := range b.callN("agent.list", nil)["agents"].([]any) {
			m := e.(map[string]any)
			paths[str(m["path"])] = str(m["status"])
		}
		if paths["lead"] != "" && paths["lead/w1"] != "" && paths["lead"] != "corrupt" && paths["lead/w1"] != "corrupt" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the team on the new active daemon: %v", paths)
		}
		time.Sleep(100 * time.Millisecond) // the takeover scan has no event
	}
	c.healthy(b, 30*time.Second)
	res := b.callN("agent.send", map[string]any{"agent_id": lead, "message": "after the pause"})
	if !strings.Contains(str(res["response"]), "after the pause") {
		t.Fatalf("send after the pause: %v", res)
	}
}

// TestThreeMachinesOnLoopback is the README's three-machine cluster as
// far as one machine allows: three daemons, each with its server on its
// own address (127.0.0.1, .2, .3: the whole of 127/8 is loopback on
// Linux), all on the same client and route ports, routed by address, as
// three machines would be, with NATS's mutual TLS on clients and routes
// (a CA and one certificate per node, made here). One serves, two stand
// by naming it, the team answers, and a client without a certificate is
// refused.
func TestThreeMachinesOnLoopback(t *testing.T) {
	ports := freePorts(t, 2)
	client, route := strconv.Itoa(ports[0]), strconv.Itoa(ports[1])
	hosts := []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"}
	certs := makeCerts(t, hosts)
	ds := make([]*testDaemon, 3)
	exits := make([]chan struct{}, 3)
	for i := range ds {
		ds[i] = newTestDaemon(t, modeBinary)
	}
	// The README's step: every node gets the first one's workers.json.
	sharedDaemonKey(t, ds[0].Home, ds[1].Home, ds[2].Home)
	for i, h := range hosts {
		var others []string
		for j, o := range hosts {
			if j != i {
				others = append(others, "nats://"+o+":"+route)
			}
		}
		d := ds[i]
		d.args = []string{"--cluster-embedded", "--node", fmt.Sprintf("m%d", i+1), "--nats-host", h, "--nats-port", client,
			"--nats-cluster-port", route, "--routes", strings.Join(others, ","),
			"--nats-tls-cert", certs.cert[i], "--nats-tls-key", certs.key[i], "--nats-tls-ca", certs.ca}
		ex, err := d.launch()
		if err != nil {
			t.Fatal(err)
		}
		exits[i] = ex
	}
	active := serving(t, ds, exits, -1, 3*time.Minute)
	a := ds[active]
	if nc, err := nats.Connect("nats://127.0.0.2:"+client, nats.Timeout(5*time.Second)); err == nil {
		nc.Close()
		t.Fatal("a client without a certificate was let in")
	}
	script := writeScripts(t, a.dir)
	bot := a.createAgent("bot", "scripted", script, "")
	if res := a.callN("agent.send", map[string]any{"agent_id": bot, "message": "across machines"}); !strings.Contains(str(res["response"]), "across machines") {
		t.Fatalf("send: %v", res)
	}
	for i, d := range ds {
		if i == active {
			continue
		}
		deadline := time.Now().Add(time.Minute)
		for role(d) != "standby" {
			if time.Now().After(deadline) {
				t.Fatalf("m%d's role is %q, want standby\n%s", i+1, role(d), d.Output())
			}
			time.Sleep(100 * time.Millisecond) // no event for "standing by"
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		st, err := protocol.CallJSON(ctx, d.Sock, "daemon.status", nil)
		cancel()
		cl, _ := st["cluster"].(map[string]any)
		if err != nil || str(cl["active_node"]) != fmt.Sprintf("m%d", active+1) || len(cl["peers"].([]any)) != 3 {
			t.Fatalf("m%d's cluster block: %v (%v), want the active node m%d and three log servers", i+1, cl, err, active+1)
		}
	}
}

// testCerts are PEM files: a CA, and a certificate and key per node.
type testCerts struct {
	ca        string
	cert, key []string
}

// makeCerts makes a CA and, for each host, a certificate for that
// address, good for server and client use (a NATS node is both).
func makeCerts(t *testing.T, hosts []string) testCerts {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "warren test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	out := testCerts{ca: writePEM(t, filepath.Join(dir, "ca.pem"), "CERTIFICATE", caDER)}
	for i, h := range hosts {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(int64(i + 2)), Subject: pkix.Name{CommonName: h},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			IPAddresses: []net.IP{net.ParseIP(h)}, KeyUsage: x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		out.cert = append(out.cert, writePEM(t, filepath.Join(dir, fmt.Sprintf("n%d.pem", i)), "CERTIFICATE", der))
		out.key = append(out.key, writePEM(t, filepath.Join(dir, fmt.Sprintf("n%d-key.pem", i)), "EC PRIVATE KEY", kder))
	}
	return out
}

func writePEM(t *testing.T, path, kind string, der []byte) string {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
