package tests

// The kill -9 torture of torture_test.go on store/jetstream: the same load,
// the same ledger and the same checks after every restart
// (verifyAfterRestart), with the logs read back from the stream instead of
// the home's files. Two clusters:
//
//   - one node: the daemon runs its own server (--cluster-embedded), so
//     every kill -9 of the daemon kills the NATS server (the stream's only
//     node, its leader) with it;
//   - three nodes: the daemon's embedded server routed to two NATS servers
//     that the test runs as processes of its own (this test binary,
//     natsHelperEnv), R3. Every other round the stream leader is killed
//     with kill -9 while the load runs (a helper process, or the daemon
//     itself when its server leads), the load goes on, and the helper is
//     restarted before the daemon is killed.
//
// The verification reads through a new connection each round. With one
// connection kept across rounds (through server kills and reconnects),
// every read of one round once stalled until its deadline, when the
// reader made a consumer per read; a consumer could be placed on a killed
// server and never answer (docs/DECISIONS.md, "Reads without consumers").
// The reader makes none now; one kept connection has not been tried again.

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/store/jetstream"
	"github.com/warren-dev/warren/store/jetstream/natsembed"
)

// natsHelperEnv makes the test binary a NATS server (JSON EmbedOptions).
const natsHelperEnv = "WARREN_TEST_NATS_SERVER"

// Cluster torture profile: daemon kills per cluster shape. The quick one
// took 16 s with one node (4 kills) and 91 s with three (4 kills, 2 of the
// stream leader) on the 2-core machine at a load average of 17: restarts
// wait for the claims to lapse and for elections. So three nodes get 3
// kills (1 of the leader) quick; WARREN_LONG=1 gives 100 to each (with
// reads without consumers: about 6 min with one node, 25 min with three,
// 50 of them leader kills, at a load average of 3-5).
const (
	tortureClusterRounds     = 4
	tortureCluster3Rounds    = 3
	tortureClusterLongRounds = 100
	// tortureOwnerTTL is the daemons' --owner-ttl: a restart after a kill
	// -9 waits for the killed daemon's claims to lapse.
	tortureOwnerTTL = 2 * time.Second
)

// runNATSHelper runs one sync-always NATS server until killed.
func runNATSHelper(spec string) int {
	var hs helperSpec
	if err := json.Unmarshal([]byte(spec), &hs); err != nil {
		fmt.Println("bad spec:", err)
		return 2
	}
	o := hs.Options
	o.StartTimeout = procReadyDeadline
	o.Users = daemonOnly(hs.Daemon)
	srv, err := natsembed.Start(o)
	if err != nil {
		fmt.Println("embed:", err)
		return 1
	}
	fmt.Println("ready")
	srv.WaitForShutdown()
	return 0
}

// helperSpec is what a helper process is given: its server's options,
// and the daemon's public key, the one user its server lets in (as every
// node of a daemon's cluster does).
type helperSpec struct {
	Options natsembed.Options
	Daemon  ed25519.PublicKey
}

// natsHelper is a NATS server process of the test.
type natsHelper struct {
	t      *testing.T
	opts   natsembed.Options
	daemon ed25519.PublicKey
	cmd    *exec.Cmd
	done   chan struct{}
}

func (h *natsHelper) start() {
	h.t.Helper()
	spec, _ := json.Marshal(helperSpec{Options: h.opts, Daemon: h.daemon})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), natsHelperEnv+"="+string(spec))
	out, err := cmd.StdoutPipe()
	if err != nil {
		h.t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	h.cmd, h.done = cmd, make(chan struct{})
	line, _ := bufio.NewReader(out).ReadString('\n')
	go func(done chan struct{}) {
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
		close(done)
	}(h.done)
	if strings.TrimSpace(line) != "ready" {
		_ = cmd.Process.Kill()
		<-h.done
		h.t.Fatalf("NATS helper %s did not start: %q", h.opts.Name, line)
	}
}

func (h *natsHelper) kill() {
	_ = h.cmd.Process.Signal(syscall.SIGKILL)
	<-h.done
}

func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		_ = l.Close()
	}
	return ports
}

// clusterTorture is the state of one cluster torture run.
type clusterTorture struct {
	probe   string // the probe agent of service rounds
	t       *testing.T
	d       *testDaemon
	helpers []*natsHelper
	urls    string             // every server's client URL
	key     ed25519.PrivateKey // the daemon's, which the servers let in
	reader  *jetstream.Store
	js      natsjs.JetStream
	killed  time.Time // the last kill -9 of the daemon
}

// TestTortureKill9JetStream is TestTortureKill9 on store/jetstream (see the
// file comment). Quick profile (seed fixed): 4 kills with one node, 3
// with three; WARREN_LONG=1: 100 each. WARREN_TORTURE_SEED replays a schedule.
func TestTortureKill9JetStream(t *testing.T) {
	rounds, rounds3 := tortureClusterRounds, tortureCluster3Rounds
	if os.Getenv("WARREN_LONG") == "1" {
		rounds, rounds3 = tortureClusterLongRounds, tortureClusterLongRounds
	}
	seed := int64(20261124)
	if s := os.Getenv("WARREN_TORTURE_SEED"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("WARREN_TORTURE_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Run("embedded-1node", func(t *testing.T) { tortureCluster(t, seed, rounds, 1) })
	t.Run("routes-3nodes", func(t *testing.T) { tortureCluster(t, seed, rounds3, 3) })
}

func tortureCluster(t *testing.T, seed int64, rounds, nodes int) {
	t.Logf("seed %d, %d rounds, %d nodes (WARREN_TORTURE_SEED=%d to replay the schedule)", seed, rounds, nodes, seed)
	rng := rand.New(rand.NewSource(seed))
	d := newTestDaemon(t, modeBinary)
	ports := freePorts(t, 2*nodes) // client ports, then route ports
	d.args = []string{"--cluster-embedded", "--node", "n1", "--nats-port", strconv.Itoa(ports[0]),
		"--owner-ttl", tortureOwnerTTL.String()}
	d.readyWait = 3 * time.Minute
	ct := &clusterTorture{t: t, d: d, key: sharedDaemonKey(t, d.Home)}
	urls := []string{fmt.Sprintf("nats://127.0.0.1:%d", ports[0])}
	if nodes > 1 {
		var routes []string
		for i := range nodes {
			routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", ports[nodes+i]))
		}
		d.args = append(d.args, "--nats-cluster-port", strconv.Itoa(ports[nodes]), "--routes", strings.Join(routes[1:], ","))
		for i := 1; i < nodes; i++ {
			h := &natsHelper{t: t, opts: natsembed.Options{Name: fmt.Sprintf("n%d", i+1), Dir: filepath.Join(d.dir, fmt.Sprintf("nats%d", i+1)),
				Port: ports[i], ClusterName: "warren", ClusterPort: ports[nodes+i], Routes: routes, RouteSecret: natsembed.RoutePassword(ct.key)},
				daemon: ct.key.Public().(ed25519.PublicKey)}
			h.start()
			t.Cleanup(h.kill)
			ct.helpers = append(ct.helpers, h)
			urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", ports[i]))
		}
	}
	ct.urls = strings.Join(urls, ",")
	d.readLogs = ct.readLogs
	// A failure names what the ledger missed; the daemon's own log says
	// why (claims, retries), so its last lines go with it.
	t.Cleanup(func() {
		if t.Failed() {
			lines := strings.Split(d.Output(), "\n")
			t.Logf("the daemon's log, last %d lines:\n%s", min(len(lines), 200), strings.Join(lines[max(0, len(lines)-200):], "\n"))
		}
	})
	script := writeScripts(t, d.dir)
	led := newLedger()
	leaderKills := 0
	began := time.Now()
	// A short profile may draw rounds that acknowledge no message (the
	// clients race for the round's few acknowledgements): it runs more
	// rounds, up to three times as many, until the load has acknowledged
	// at least one agent, message and turn.
	tooLittle := func() bool {
		agents, msgs, turns := led.counts()
		return agents == 0 || msgs == 0 || turns == 0
	}
	kills, served := 0, 0
	alive := false // the daemon lived through the last round (a leader kill only)
	for round := 0; round < rounds || (tooLittle() && round < 3*rounds); round++ {
		if testing.Verbose() {
			t.Logf("round %d at %v", round, time.Since(began).Round(time.Millisecond))
		}
		if !alive {
			ct.start(round)
			ct.waitTakenOver(round, led)
		}
		alive = false
		tStart := time.Since(began)
		verifyAfterRestart(t, d, led, round)
		tVerify := time.Since(began)
		load := startTortureLoad(d, led, script, rng, round)
		load.waitAcks(t, load.target)
		if testing.Verbose() {
			t.Logf("round %d: started %v verified %v load done %v", round, tStart.Round(time.Millisecond), tVerify.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
		}
		if nodes > 1 && round%2 == 1 {
			service := round%4 == 1
			if service {
				ct.leaderToHelper(round)
			}
			if ct.killLeader(round, load) {
				leaderKills++
				if service {
					// A service round: the daemon is not killed; it
					// must go on serving by itself (issue 37).
					load.stop()
					ct.assertServed(round, script)
					served++
					alive = true
					continue
				}
			}
		}
		d.Kill()
		kills++
		ct.killed = time.Now()
		load.stop()
	}
	ct.start(kills)
	ct.waitTakenOver(kills, led)
	verifyAfterRestart(t, d, led, kills)
	agents, msgs, turns := led.counts()
	t.Logf("%d daemon kills, %d leader kills of a NATS helper (%d with the daemon left running and serving); acknowledged: %d agents, %d messages, %d turns",
		kills, leaderKills, served, agents, msgs, turns)
	if agents == 0 || msgs == 0 || turns == 0 {
		t.Fatalf("the load did too little to prove anything: %d agents, %d messages, %d turns", agents, msgs, turns)
	}
}

// start starts the daemon. The claims of a killed daemon outlive it by
// tortureOwnerTTL, and a restart does not take over its own earlier boot's
// claims (the claim rule is issue 15's next step): an agent still claimed
// is listed unserved and a claimed USER inbox stops the start. So a start
// waits until the claims have lapsed; this is a rule on time, there is no
// event to wait for (with one node the server is down meanwhile, and
// expires them when it starts). The daemon itself waits for the cluster's
// JetStream, which may take a while after a kill (leader elections).
func (ct *clusterTorture) start(round int) {
	ct.t.Helper()
	if !ct.killed.IsZero() {
		time.Sleep(time.Until(ct.killed.Add(tortureOwnerTTL + 500*time.Millisecond)))
	}
	if err := ct.d.start(); err != nil {
		ct.t.Fatalf("round %d: %v", round, err)
	}
}

// waitTakenOver waits until agent.list shows every acknowledged agent. The
// start waits out the killed boot's claims by the clock, but the server
// expires a lapsed claim up to about a second late; an agent whose claim
// was still there at recovery is not listed until the running daemon's
// takeover scan (every 250 ms) takes it over. No event tells the client
// that the scan ran, so this polls, for up to a minute.
func (ct *clusterTorture) waitTakenOver(round int, led *ledger) {
	ct.t.Helper()
	ctx := procCtx(ct.t)
	deadline := time.Now().Add(time.Minute)
	for {
		list, err := ct.d.Client().Call(ctx, "agent.list", nil)
		if err != nil {
			ct.t.Fatalf("round %d: agent.list after restart: %v\n%s", round, err, ct.d.Output())
		}
		listed := map[string]bool{}
		for _, a := range list["agents"].([]any) {
			listed[a.(map[string]any)["agent_id"].(string)] = true
		}
		all := true
		for _, a := range led.snapshot() {
			all = all && listed[a.ID]
		}
		// After the deadline, verifyAfterRestart names what is missing.
		if all || time.Now().After(deadline) {
			return
		}
		time.Sleep(50 * time.Millisecond) // polling agent.list: no event says "taken over"
	}
}

// leaderToHelper moves the log stream's leader to a helper server (a
// stepdown naming it), so that the round's leader kill kills a server the
// daemon does not run.
func (ct *clusterTorture) leaderToHelper(round int) {
	ct.t.Helper()
	want := ct.helpers[0].opts.Name
	nc := connectAsDaemon(ct.t, ct.key, ct.urls)
	defer nc.Close()
	body := []byte(`{"placement":{"preferred":"` + want + `"}}`)
	for try := 0; ct.streamLeader() != want; try++ {
		if try == 40 {
			ct.t.Fatalf("round %d: the stream leader stays %q; wanted %s", round, ct.streamLeader(), want)
		}
		_, _ = nc.Request("$JS.API.STREAM.LEADER.STEPDOWN."+jetstream.StreamName, body, 5*time.Second)
		time.Sleep(250 * time.Millisecond) // the election settles; no event for it
	}
}

// assertServed checks that the daemon, left running through a leader
// kill, serves: a probe turn is answered within a minute and, within 20
// s, no agent is listed degraded or corrupt.
func (ct *clusterTorture) assertServed(round int, script string) {
	ct.t.Helper()
	if ct.probe == "" {
		ct.probe = ct.d.createAgent("probe", "scripted", script, "")
	}
	took := probe(ct.t, ct.d, ct.probe, time.Now(), time.Minute)
	deadline := time.Now().Add(20 * time.Second)
	for {
		list, err := ct.d.Client().Call(procCtx(ct.t), "agent.list", nil)
		if err != nil {
			ct.t.Fatalf("round %d: agent.list after a leader kill: %v", round, err)
		}
		bad := unwell(list)
		if len(bad) == 0 {
			ct.t.Logf("round %d: the daemon served a probe %.2f s after the leader kill; nothing degraded", round, took.Seconds())
			return
		}
		if time.Now().After(deadline) {
			ct.t.Fatalf("round %d: 20 s after a leader kill, still degraded or corrupt: %v", round, bad)
		}
		time.Sleep(200 * time.Millisecond) // agent.list has no wait
	}
}

// streamLeader names the server leading the log stream ("" if none).
func (ct *clusterTorture) streamLeader() string {
	if ct.js == nil {
		nc := connectAsDaemon(ct.t, ct.key, ct.urls, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
		ct.t.Cleanup(nc.Close)
		var err error
		if ct.js, err = natsjs.New(nc); err != nil {
			ct.t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := ct.js.Stream(ctx, jetstream.StreamName)
	if err != nil || s.CachedInfo().Cluster == nil {
		return ""
	}
	return s.CachedInfo().Cluster.Leader
}

// killLeader kills the stream leader with kill -9 while the load runs. A
// helper is restarted once the load has gone on (up to 3 more
// acknowledged operations, or 10 s: with the leader gone, claims and
// appends may fail until a new leader serves, which is allowed) and has
// caught up again. Leadership with the daemon's own server is left to the
// daemon kill that ends every round. It reports whether it killed a
// helper.
func (ct *clusterTorture) killLeader(round int, load *tortureLoad) bool {
	leader := ct.streamLeader()
	for _, h := range ct.helpers {
		if h.opts.Name != leader {
			continue
		}
		h.kill()
		ct.t.Logf("round %d: killed the stream leader %s (kill -9) under load", round, leader)
		more := time.NewTimer(10 * time.Second)
	wait:
		for n := 0; n < 3; n++ {
			select {
			case <-load.acks:
			case <-more.C:
				break wait
			case <-ct.d.Exited():
				ct.t.Fatalf("round %d: the daemon exited after the stream leader was killed: %v\n%s", round, ct.d.exitErr(), ct.d.Output())
			}
		}
		more.Stop()
		h.start()
		ct.waitCurrent(round)
		return true
	}
	ct.t.Logf("round %d: the stream leader is %q (the daemon's server, or none): the daemon kill is the leader kill", round, leader)
	return false
}

// waitCurrent waits until the stream has a leader and every replica is
// current again, so that the next kill keeps a quorum. The server has no
// event for this: it is polled.
func (ct *clusterTorture) waitCurrent(round int) {
	deadline := time.Now().Add(procReadyDeadline)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		s, err := ct.js.Stream(ctx, jetstream.StreamName)
		cancel()
		if err == nil && s.CachedInfo().Cluster != nil && s.CachedInfo().Cluster.Leader != "" {
			ok := len(s.CachedInfo().Cluster.Replicas) == len(ct.helpers)
			for _, r := range s.CachedInfo().Cluster.Replicas {
				ok = ok && r.Current && !r.Offline
			}
			if ok {
				return
			}
		}
		if time.Now().After(deadline) {
			ct.t.Fatalf("round %d: the stream did not get all replicas current within %v (last error %v)", round, procReadyDeadline, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// readLogs reads every agent's log from the stream through
// store/jetstream's reader (CRC and seq checked on every entry) and checks
// seqs run 1, 2, 3, ...
func (ct *clusterTorture) readLogs(round int) map[string][]eventlog.Entry {
	ct.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A connection of its own each time (see the file comment).
	nc := connectAsDaemon(ct.t, ct.key, ct.urls)
	defer nc.Close()
	// A reader: zero Replicas and OwnerTTL keep the daemon's settings. The
	// servers are sync-always (Embed), but a plain client cannot read that
	// setting.
	reader, err := jetstream.New(ctx, jetstream.Options{Conn: nc, UnsafeLazyFsync: true})
	if err != nil {
		ct.t.Fatalf("round %d: opening the stream to verify: %v", round, err)
	}
	defer reader.Close()
	ct.reader = reader
	ids, err := ct.reader.Agents(ctx)
	if err != nil {
		ct.t.Fatalf("round %d: listing the stream's logs: %v", round, err)
	}
	out := map[string][]eventlog.Entry{}
	for _, id := range ids {
		r, err := ct.reader.Read(ctx, id, 0, 0)
		if err != nil {
			ct.t.Fatalf("round %d: reading the log of %s: %v", round, id, err)
		}
		var entries []eventlog.Entry
		for {
			e, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				ct.t.Fatalf("round %d: log %s is not valid after %d entries: %v\n%s", round, id, len(entries), err, ct.describe())
			}
			if e.Seq != uint64(len(entries)+1) {
				ct.t.Fatalf("round %d: log %s: entry %d has seq %d (gap or repeat)", round, id, len(entries)+1, e.Seq)
			}
			entries = append(entries, e)
		}
		_ = r.Close()
		out[id] = entries
	}
	return out
}

// describe says how the stream and the test's connection stand (for a
// failure's message).
func (ct *clusterTorture) describe() string {
	ct.streamLeader() // connects ct.js
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := ct.js.Stream(ctx, jetstream.StreamName)
	if err != nil {
		return fmt.Sprintf("stream info: %v", err)
	}
	b, _ := json.Marshal(s.CachedInfo().Cluster)
	return fmt.Sprintf("stream %s: %d messages, cluster %s; test connection %s", jetstream.StreamName, s.CachedInfo().State.Msgs, b, ct.js.Conn().ConnectedUrl())
}
