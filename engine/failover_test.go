package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/warren-dev/warren/config"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/scripted"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/store"
	"github.com/warren-dev/warren/store/jetstream"
)

// failoverTTL is the owner TTL of the failover test: a few seconds.
const failoverTTL = 3 * time.Second

// TestFailoverTwoCoresThreeServers is issue 15's failover test. Three
// embedded NATS servers (loopback, temp dirs, sync-always) and two cores
// in one process, owner TTL 3 s. Core 1 runs a scripted root and two
// scripted children, all three mid-turn, with a message pending for the
// root; core 2 stands by. Core 1 is killed abruptly (its network is cut:
// its leases stop renewing; it writes nothing more, and its log handles
// stay as a paused process holds them) together with the stream leader.
// Then: core 2 claims every agent (how long after the kill is logged, and
// asserted within TTL + 1 s under WARREN_LONG); every log is whole (seq, CRC, agent.created
// first, the tree); each of the three open runs got exactly one
// run.interrupted; the root's pending messages are consumed by exactly
// one completed turn; core 1's late appends (through its untouched
// handles, once its network is back) are fenced.
func TestFailoverTwoCoresThreeServers(t *testing.T) {
	start := time.Now()
	srvs, urls := startNATSCluster(t)
	helper, err := filepath.Abs("../provider/scripted/python")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("WARREN_TEST_HELPER", helper)
	testdata, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}

	// Core 1, its connection through a proxy the test can cut.
	px := newCutProxy(t, srvs[0].Addr().String())
	reconnected := make(chan struct{}, 16)
	nc1, err := nats.Connect(px.URL(), nats.IgnoreDiscoveredServers(), nats.MaxReconnects(-1),
		nats.ReconnectWait(50*time.Millisecond), nats.ReconnectBufSize(-1),
		nats.ReconnectHandler(func(*nats.Conn) { reconnected <- struct{}{} }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc1.Close)
	z := &zombieStore{Store: failoverStore(t, nc1, "node1", "boot1", srvs)}
	c1 := failoverCore(t, "/home1", z, "boot1", true)
	if _, err := c1.Recover(context.Background()); err != nil {
		t.Fatalf("core 1 Recover: %v", err)
	}
	root, err := c1.CreateAgent(context.Background(), CreateSpec{Name: "root", Provider: "scripted",
		Model: filepath.Join(testdata, "failover_root.py")})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := c1.Send(context.Background(), root, "start", "", "", nil); err != nil || res.Err != nil || res.Response != "spawned 2" {
		t.Fatalf("start: %+v %v", res, err)
	}
	var kids []string
	waitCore(t, c1, "the root and both children mid-turn, a message pending for the root", func() bool {
		kids = c1.tree.Children(root)
		if len(kids) != 2 {
			return false
		}
		for _, id := range append([]string{root}, kids...) {
			a, _ := c1.agent(id)
			mid := look(a, func(p *projection, l liveFlags) bool {
				return l.Running && p.Run != nil && !p.Run.Ended && p.TurnNo >= 1
			})
			if !mid {
				return false
			}
		}
		// The children's two reports are in the root's log and not
		// consumed: the root's second turn, mid-way, may name some of them
		// (only its turn.complete would consume them).
		a, _ := c1.agent(root)
		second := look(a, func(p *projection, _ liveFlags) bool { return p.TurnNo == 2 })
		es, err := c1.Log(context.Background(), root, 0)
		return second && err == nil && countEvent(es, schema.MessageEnqueued) == 2
	}, describeAgents(c1))
	t.Logf("%s: core 1 runs the three agents mid-turn", time.Since(start).Round(time.Millisecond))
	rootBefore := events(t, z, root)

	// Core 2 stands by: the USER inbox is core 1's.
	nc2, err := nats.Connect(joinURLs(urls), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc2.Close)
	st2 := newTimedStore(failoverStore(t, nc2, "node2", "boot2", srvs))
	c2 := failoverCore(t, "/home2", st2, "boot2", false)
	recovered := make(chan error, 1)
	go func() { _, err := c2.Recover(context.Background()); recovered <- err }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = c2.Close(ctx)
	})
	for id := range st2.attempts {
		if id == store.UserID {
			break // refused: core 2 is standing by
		}
	}

	// The kill: core 1's network and the stream leader.
	killed := time.Now()
	z.Kill()
	px.Cut()
	leader := -1
	for i, s := range srvs {
		if s.JetStreamIsStreamLeader("$G", jetstream.StreamName) {
			leader = i
		}
	}
	if leader < 0 {
		t.Fatal("no server leads the stream")
	}
	srvs[leader].Shutdown()
	c1.Abandon()

	select {
	case err := <-recovered:
		if err != nil {
			t.Fatalf("core 2 Recover: %v", err)
		}
	case <-time.After(90 * time.Second):
		t.Fatal("core 2 never took the USER inbox over")
	}
	t.Logf("%s: core 2 recovered (standby over)", time.Since(start).Round(time.Millisecond))
	all := append([]string{root}, kids...)
	waitCore(t, c2, "core 2 runs the three agents and the root consumed its messages", func() bool {
		for _, id := range all {
			if _, ok := c2.agent(id); !ok {
				return false
			}
		}
		a, _ := c2.agent(root)
		return look(a, func(p *projection, l liveFlags) bool {
			return p.Run != nil && p.Run.Ended && p.Pending.Len() == 0 && !l.Busy
		})
	}, describeAgents(c2))

	// How long after the kill core 2 claimed each agent: a measurement,
	// logged; asserted (within TTL + 1 s) only in the long profile, since
	// under the load of the whole suite on 2 cores it measures scheduling.
	var worst time.Duration
	for _, id := range append([]string{store.UserID}, all...) {
		at, ok := st2.claimedAt(id)
		if !ok {
			t.Fatalf("core 2 never claimed %s", id)
		}
		lat := at.Sub(killed)
		if lat > worst {
			worst = lat
		}
		if os.Getenv("WARREN_LONG") == "1" && lat > failoverTTL+time.Second {
			t.Errorf("core 2 claimed %s %s after the kill; want within TTL + 1 s = %s", id, lat, failoverTTL+time.Second)
		}
	}

	t.Logf("%s: core 2 runs the three agents", time.Since(start).Round(time.Millisecond))

	// A late append from core 1, through its handles as they were, once
	// its connection is back and answers a JetStream request (the reply
	// interest of a reconnected client reaches the other servers over the
	// routes a moment later).
	live := (leader + 1) % len(srvs)
	px.Resume(srvs[live].Addr().String())
	select {
	case <-reconnected:
	case <-time.After(30 * time.Second):
		t.Fatal("core 1's connection did not come back")
	}
	js1, err := natsjs.New(nc1)
	if err != nil {
		t.Fatal(err)
	}
	pollFor(t, 30*time.Second, "a JetStream answer on core 1's connection", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := js1.Stream(ctx, jetstream.StreamName)
		return err == nil
	})
	for _, id := range []string{root, store.UserID} {
		raw := z.rawLog(id)
		if raw == nil {
			t.Fatalf("no handle of core 1 for %s", id)
		}
		_, err := raw.Append(schema.TurnCancelled, schema.TurnCancelledData{RunID: "late", Turn: 9})
		if !errors.Is(err, store.ErrFenced) {
			t.Fatalf("core 1's late append to %s: %v; want ErrFenced (JetStream 10071)", id, err)
		}
	}

	// SPEC 11 on every log.
	logs := map[string][]eventlog.Entry{}
	for _, id := range append([]string{store.UserID}, all...) {
		logs[id] = events(t, st2, id)
		for _, bad := range checkFailoverLog(id, logs[id], id == store.UserID) {
			t.Error(bad)
		}
	}
	for _, k := range kids {
		if p := createdParent(logs[k]); p != root {
			t.Errorf("child %s names parent %q, want %s", k, p, root)
		}
	}
	// The root's log as core 1 left it is a prefix of the log now.
	if len(logs[root]) < len(rootBefore) {
		t.Fatalf("the root's log shrank: %d entries, had %d", len(logs[root]), len(rootBefore))
	}
	for i, e := range rootBefore {
		if g := logs[root][i]; g.Seq != e.Seq || g.Event != e.Event || string(g.Data) != string(e.Data) {
			t.Fatalf("the root's entry %d changed over the failover", e.Seq)
		}
	}
	// Each of the three runs open at the kill got exactly one
	// run.interrupted, written by core 2 after its claim.
	for _, id := range all {
		if n := countEvent(logs[id], schema.RunInterrupted); n != 1 {
			t.Errorf("%s: %d run.interrupted, want 1:%s", id, n, eventNames(logs[id]))
		}
	}
	t.Logf("claims by core 2 within %s of the kill (TTL %s); stream leader %s killed; test ran %s",
		worst.Round(time.Millisecond), failoverTTL, srvs[leader].Name(), time.Since(start).Round(time.Millisecond))
}

func joinURLs(urls []string) string {
	out := ""
	for i, u := range urls {
		if i > 0 {
			out += ","
		}
		out += u
	}
	return out
}

// failoverStore is an R3 store on the test's cluster, retrying while the
// cluster settles. Requests get 15 s: a timed-out append poisons its
// handle by design, and an R3 commit under a loaded CI machine can take
// seconds; the test checks what is written, the claims how fast.
func failoverStore(t *testing.T, nc *nats.Conn, node, boot string, srvs []*server.Server) store.Store {
	t.Helper()
	var st *jetstream.Store
	var err error
	pollFor(t, 30*time.Second, "the R3 stream and buckets", func() bool {
		st, err = jetstream.New(context.Background(), jetstream.Options{Conn: nc, Node: node, BootID: boot,
			Embedded: srvs, Replicas: 3, OwnerTTL: failoverTTL, Timeout: 15 * time.Second})
		return err == nil
	})
	return st
}

// failoverCore builds a core on st with the scripted provider; hold makes
// its scripted agents stay mid-turn (failover_root.py, failover_child.py).
func failoverCore(t *testing.T, home string, st store.Store, boot string, hold bool) *Core {
	t.Helper()
	cfg := config.Default()
	pc := config.ProviderConfig{EnvPass: []string{"WARREN_TEST_HELPER"}}
	if hold {
		pc.Env = map[string]string{"WARREN_FAILOVER_HOLD": "1"}
	}
	cfg.Providers["scripted"] = pc
	sp := scripted.New(scripted.Options{TurnTimeout: 5 * time.Minute, Logger: hclog.NewNullLogger()})
	c, err := NewCore(context.Background(), withDefaults(CoreOptions{FS: faultfs.NewMem(), Home: home, Store: st, BootID: boot, Config: cfg,
		Providers: map[string]provider.Provider{"scripted": sp}, DefaultProvider: "scripted",
		Logger: hclog.NewNullLogger(), TakeoverEvery: 100 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// checkFailoverLog checks one log against SPEC 11 as far as one log tells:
// seqs 1..n (the store's reader also checks each line's CRC), agent.created
// first, claims with growing epochs, at most one run.interrupted per run
// and no end of a run after it, message ids enqueued once and consumed by
// at most one completed turn.
func checkFailoverLog(id string, es []eventlog.Entry, user bool) []string {
	var bad []string
	badf := func(format string, args ...any) { bad = append(bad, id+": "+fmt.Sprintf(format, args...)) }
	completed := map[string]bool{}
	for _, e := range es {
		if e.Event == schema.TurnComplete {
			completed[runOf(e)] = true
		}
	}
	var epoch uint64
	interrupted := map[string]int{}
	enqueued := map[string]bool{}
	consumed := map[string]string{}
	for i, e := range es {
		if e.Seq != uint64(i+1) {
			badf("position %d holds seq %d", i+1, e.Seq)
			return bad
		}
		switch e.Event {
		case schema.AgentCreated:
			if user || i != 0 {
				badf("agent.created at seq %d", e.Seq)
			}
		case schema.AgentClaimed:
			var d schema.AgentClaimedData
			if json.Unmarshal(e.Data, &d) != nil || d.Epoch <= epoch {
				badf("agent.claimed at seq %d with epoch %d after epoch %d", e.Seq, d.Epoch, epoch)
			}
			epoch = d.Epoch
		case schema.RunInterrupted:
			r := runOf(e)
			interrupted[r]++
			if interrupted[r] > 1 {
				badf("run %s interrupted twice (seq %d)", r, e.Seq)
			}
		case schema.RunResumed:
			interrupted[runOf(e)] = 0
		case schema.TurnComplete, schema.TurnFailed, schema.TurnCancelled:
			if interrupted[runOf(e)] > 0 {
				badf("run %s ended (%s at seq %d) after its run.interrupted", runOf(e), e.Event, e.Seq)
			}
		case schema.MessageEnqueued:
			var d struct {
				ID string `json:"message_id"`
			}
			_ = json.Unmarshal(e.Data, &d)
			if enqueued[d.ID] {
				badf("message %s enqueued twice", d.ID)
			}
			enqueued[d.ID] = true
		case schema.TurnStart:
			var d schema.TurnStartData
			_ = json.Unmarshal(e.Data, &d)
			if !completed[d.RunID] {
				continue
			}
			for _, m := range d.MessageIDs {
				if prev, ok := consumed[m]; ok && prev != d.RunID {
					badf("message %s consumed by two completed turns (%s, %s)", m, prev, d.RunID)
				}
				consumed[m] = d.RunID
			}
		}
	}
	if !user && (len(es) == 0 || es[0].Event != schema.AgentCreated) {
		badf("no agent.created first")
	}
	for m := range enqueued {
		if _, ok := consumed[m]; !ok && !user {
			badf("message %s never consumed by a completed turn", m)
		}
	}
	return bad
}

func runOf(e eventlog.Entry) string {
	var d struct {
		RunID string `json:"run_id"`
	}
	_ = json.Unmarshal(e.Data, &d)
	return d.RunID
}

func createdParent(es []eventlog.Entry) string {
	if len(es) == 0 || es[0].Event != schema.AgentCreated {
		return ""
	}
	var d schema.AgentCreatedData
	if json.Unmarshal(es[0].Data, &d) != nil || d.ParentID == nil {
		return ""
	}
	return *d.ParentID
}

func countEvent(es []eventlog.Entry, event string) int {
	n := 0
	for _, e := range es {
		if e.Event == event {
			n++
		}
	}
	return n
}
