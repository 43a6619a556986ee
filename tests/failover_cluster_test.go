package tests

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warren-dev/warren/protocol"
	"github.com/warren-dev/warren/store/jetstream"
)

// TestThreeEmbeddedDaemonsFailover is issue 15's failover with nothing but
// warren: three `daemon start --cluster-embedded --routes` processes form
// a three-server cluster, one serves and two stand by. A root agent with a
// spawned child is mid-turn when the serving daemon is killed (kill -9, its
// embedded server with it, often the cluster's meta and stream leader). A
// standby must serve the team again: the tree back, the open run
// interrupted exactly once, the agent answering. (A standby used to exit
// on the first "JetStream temporarily unavailable" of the leader election,
// taking the quorum with it.)
func TestThreeEmbeddedDaemonsFailover(t *testing.T) {
	c := startCluster3(t, "--owner-ttl", "3s")
	ds, exits := c.ds, c.exits
	active, a, _, lead := c.activeAgent("lead")
	spawnW1(t, a, lead)
	fifo := filepath.Join(a.dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	go func() { // the turn stays open until the daemon dies
		_, _ = a.Client().Call(context.Background(), "agent.send", map[string]any{"agent_id": lead, "message": "fifo " + fifo})
	}()
	waitEvents(t, a, lead, "turn.start", 2) // the fifo turn is open in the log

	killed := time.Now()
	a.Kill()
	next := serving(t, ds, exits, active, 2*time.Minute)
	t.Logf("n%d killed; n%d served %.1f s later", active+1, next+1, time.Since(killed).Seconds())
	b := ds[next]

	// An agent whose lease had not lapsed yet when the standby recovered
	// is taken by its takeover scan a moment later (every 250 ms).
	var paths map[string]string
	deadline := time.Now().Add(time.Minute)
	for {
		paths = map[string]string{}
		for _, e := range b.callN("agent.list", nil)["agents"].([]any) {
			m := e.(map[string]any)
			paths[str(m["path"])] = str(m["status"])
		}
		if paths["lead"] != "" && paths["lead/w1"] != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a minute after the failover the tree is %v; want lead and lead/w1", paths)
		}
		time.Sleep(50 * time.Millisecond) // polling agent.list: no event says "taken over"
	}
	if paths["lead/w1"] == "corrupt" || paths["lead"] == "corrupt" {
		t.Fatalf("after the failover the tree is %v; nothing may be corrupt", paths)
	}
	lg := b.callN("agent.log", map[string]any{"agent_id": lead, "limit": 10000})
	interrupted, claims := 0, 0
	for _, e := range lg["events"].([]any) {
		switch str(e.(map[string]any)["event"]) {
		case "run.interrupted":
			interrupted++
		case "agent.claimed":
			claims++
		}
	}
	if interrupted != 1 || claims != 1 {
		t.Fatalf("lead's log after the failover: %d run.interrupted (want 1), %d agent.claimed (want 1, the new owner's):\n%v", interrupted, claims, lg)
	}
	// The new owner re-runs the interrupted run by itself (resume policy
	// auto): its script opens the FIFO again; let it finish.
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write([]byte("done"))
	w.Close()
	waitEvents(t, b, lead, "turn.complete", 2) // the spawn's turn, then the re-run
	if lg := fmt.Sprint(b.callN("agent.log", map[string]any{"agent_id": lead, "limit": 10000})); !strings.Contains(lg, "by:auto") ||
		!strings.Contains(lg, "reason:takeover") {
		t.Fatalf("lead's log after the takeover's re-run: want run.interrupted (takeover) and run.resumed by auto:\n%s", lg)
	}
	res := b.callN("agent.send", map[string]any{"agent_id": lead, "message": "after the failover"})
	if !strings.Contains(str(res["response"]), "after the failover") {
		t.Fatalf("send after the failover: %v", res)
	}
	third := 3 - active - next
	select {
	case <-exits[third]:
		t.Fatalf("the other standby exited: %v\n%s", ds[third].exitErr(), ds[third].Output())
	default:
	}
	if !strings.Contains(ds[third].Output(), "standing by") {
		t.Fatalf("the third daemon does not say it stands by:\n%s", ds[third].Output())
	}
}

// role asks d's socket for daemon.status and returns its cluster role
// ("active", "standby"), or "" when it does not answer.
func role(d *testDaemon) string { return clusterField(d, "role") }

// clusterField is one field of the cluster block of d's daemon.status
// ("" when it does not answer).
func clusterField(d *testDaemon, key string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := protocol.CallJSON(ctx, d.Sock, "daemon.status", nil)
	if err != nil {
		return ""
	}
	cl, _ := st["cluster"].(map[string]any)
	r, _ := cl[key].(string)
	return r
}

// serving polls the daemons' sockets until one other than skip answers
// daemon.status as the active node (nothing signals "serving" but the
// socket), failing if a daemon exits meanwhile.
func serving(t *testing.T, ds []*testDaemon, exits []chan struct{}, skip int, limit time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		for i, d := range ds {
			if i == skip {
				continue
			}
			select {
			case <-exits[i]:
				t.Fatalf("daemon n%d exited: %v\n%s", i+1, d.exitErr(), d.Output())
			default:
			}
			if _, err := os.Stat(d.Sock); err != nil {
				continue
			}
			if role(d) == "active" {
				return i
			}
		}
		if time.Now().After(deadline) {
			var out strings.Builder
			for i, d := range ds {
				fmt.Fprintf(&out, "--- n%d:\n%s\n", i+1, d.Output())
			}
			t.Fatalf("no daemon served within %v\n%s", limit, out.String())
		}
		time.Sleep(100 * time.Millisecond) // polling the sockets: no signal exists for "serving"
	}
}

// waitEvents polls agent.log until the agent's log holds n entries of
// event ev.
func waitEvents(t *testing.T, d *testDaemon, id, ev string, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		got := 0
		for _, e := range d.callN("agent.log", map[string]any{"agent_id": id, "limit": 10000})["events"].([]any) {
			if str(e.(map[string]any)["event"]) == ev {
				got++
			}
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent %s has %d %s entries, want %d", id, got, ev, n)
		}
		time.Sleep(20 * time.Millisecond) // agent.log has no wait-for-entry
	}
}

// TestCleanStopHandsOverWithoutClaims: the active daemon of three
// embedded ones stops cleanly (SIGTERM). Its release names its epoch as
// clean (store/jetstream lazy.go), so a standby takes over at once,
// without waiting out the lease, and claims no agent's log at recovery:
// the agent that then runs a turn gets one agent.claimed, with the turn;
// the one at rest none. The team answers as before.
func TestCleanStopHandsOverWithoutClaims(t *testing.T) {
	if testing.Short() {
		t.Skip("three daemons and their NATS servers; run without -short")
	}
	c := startCluster3(t)
	active, a, _, lead := c.activeAgent("lead")
	spawnW1(t, a, lead)
	if res := a.callN("agent.send", map[string]any{"agent_id": lead, "message": "hello"}); !strings.Contains(str(res["response"]), "hello") {
		t.Fatalf("send before the stop: %v", res)
	}
	var w1 string
	for _, e := range a.callN("agent.list", nil)["agents"].([]any) {
		if m := e.(map[string]any); str(m["path"]) == "lead/w1" {
			w1 = str(m["agent_id"])
		}
	}
	if w1 == "" {
		t.Fatal("no lead/w1 listed")
	}
	stopped := time.Now()
	if err := a.Stop(); err != nil {
		t.Fatalf("the active daemon's clean stop: %v\n%s", err, a.Output())
	}
	next := serving(t, c.ds, c.exits, active, 2*time.Minute)
	took := time.Since(stopped)
	t.Logf("n%d stopped; n%d served %.1f s later", active+1, next+1, took.Seconds())
	if took > jetstream.DefaultOwnerTTL {
		t.Fatalf("the standby served %v after a clean stop, want less than the lease's %v (a release is taken at once)", took, jetstream.DefaultOwnerTTL)
	}
	b := c.ds[next]
	claims := func(id string) int {
		n := 0
		for _, e := range b.callN("agent.log", map[string]any{"agent_id": id, "limit": 10000})["events"].([]any) {
			if str(e.(map[string]any)["event"]) == "agent.claimed" {
				n++
			}
		}
		return n
	}
	if nl, nw := claims(lead), claims(w1); nl != 0 || nw != 0 {
		t.Fatalf("after a clean handover: lead holds %d agent.claimed, w1 %d; want none before they write", nl, nw)
	}
	if res := b.callN("agent.send", map[string]any{"agent_id": lead, "message": "after the handover"}); !strings.Contains(str(res["response"]), "after the handover") {
		t.Fatalf("send after the handover: %v", res)
	}
	if nl, nw := claims(lead), claims(w1); nl != 1 || nw != 0 {
		t.Fatalf("after a turn of lead: lead holds %d agent.claimed (want 1), w1 %d (want 0, at rest)", nl, nw)
	}
}
