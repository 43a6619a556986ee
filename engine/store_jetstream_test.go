package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/store"
	"github.com/warren-dev/warren/store/jetstream"
	"github.com/warren-dev/warren/store/jetstream/natsembed"
)

// embeddedNATS starts an embedded single-node NATS server (sync-always)
// and connects to it; both are closed when the test ends.
func embeddedNATS(t *testing.T) (*server.Server, *nats.Conn) {
	t.Helper()
	srv, err := natsembed.Start(natsembed.Options{Name: "n1", Dir: t.TempDir(), Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return srv, nc
}

// openEmbeddedStore opens store/jetstream on srv as node n1 with boot id
// boot (empty: the store's own) and an owner TTL of 5 s. The embedded
// server proves sync-always (no system account).
func openEmbeddedStore(t *testing.T, srv *server.Server, nc *nats.Conn, boot string) *jetstream.Store {
	t.Helper()
	st, err := jetstream.New(context.Background(), jetstream.Options{Conn: nc, Node: "n1", BootID: boot,
		Embedded: []*server.Server{srv}, OwnerTTL: 5 * time.Second})
	if err != nil {
		t.Fatalf("store/jetstream: %v", err)
	}
	return st
}

// jetstreamStore starts an embedded single-node NATS server and returns a
// harness setup running the core on store/jetstream.
func jetstreamStore(t *testing.T) func(h *harness) {
	t.Helper()
	srv, nc := embeddedNATS(t)
	return func(h *harness) {
		h.store = func(faultfs.FS) store.Store { return openEmbeddedStore(t, srv, nc, "") }
	}
}

// storeScenario creates a root and a child, runs turns, restarts, runs
// another turn, and returns each agent's event names and view.
func storeScenario(t *testing.T, setup ...func(h *harness)) (names map[string][]string, views []string, claims map[string]int) {
	h := newHarness(t, setup...)
	root := h.create("root", "", "echo")
	child := h.create("kid", root, "echo")
	h.send(root, "hello")
	h.send(child, "hi")
	h.quiet()
	h.restart()
	h.send(root, "again")
	h.quiet()
	h.restart()
	names = map[string][]string{}
	claims = map[string]int{}
	for _, n := range []struct{ name, id string }{{"root", root}, {"kid", child}} {
		r, err := h.c.st.Read(context.Background(), n.id, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for {
			e, err := r.Next()
			if err != nil {
				break
			}
			if e.Event == schema.AgentClaimed {
				claims[n.name]++ // store/jetstream's claim by a new owner
				continue
			}
			names[n.name] = append(names[n.name], e.Event)
		}
		_ = r.Close()
	}
	for _, id := range []string{root, child} {
		status := h.statusOf(id)
		a, _ := h.c.agent(id)
		a.View(func(p *projection, _ liveFlags) {
			views = append(views, fmt.Sprintf("%s %s pending=%d usage=%+v", p.Name, status, p.Pending.Len(), p.Usage))
		})
	}
	return names, views, claims
}

// TestCoreOnJetStreamRecoversAsLocal: a core on store/jetstream (one
// embedded node) creates agents, runs turns and restarts twice, and ends
// with the same logs (event by event) and the same agents as on the local
// store.
func TestCoreOnJetStreamRecoversAsLocal(t *testing.T) {
	localNames, localViews, localClaims := storeScenario(t)
	jsNames, jsViews, jsClaims := storeScenario(t, jetstreamStore(t))
	// After a clean stop a log is claimed with its next write only
	// (store/jetstream lazy.go): the root ran a turn after the first
	// restart, the kid wrote nothing after either. None on the local store.
	if len(localClaims) != 0 || jsClaims["root"] != 1 || jsClaims["kid"] != 0 {
		t.Fatalf("agent.claimed entries: local %v, jetstream %v (want none, and root 1, kid 0)", localClaims, jsClaims)
	}
	if !reflect.DeepEqual(localNames, jsNames) {
		t.Fatalf("logs differ:\nlocal     %v\njetstream %v", localNames, jsNames)
	}
	if !reflect.DeepEqual(localViews, jsViews) {
		t.Fatalf("agents differ:\nlocal     %+v\njetstream %+v", localViews, jsViews)
	}
	if len(jsNames["root"]) < 6 {
		t.Fatalf("the root's log is too short to have run its turns: %v", jsNames["root"])
	}
}

// TestClusterRecoveryResumesFromCheckpoints: on a cluster store the
// checkpoints live in the store's bucket (as files do on the local one):
// after a clean stop every agent is recovered from its checkpoint, the
// state equals a full fold, and a damaged checkpoint is refused with the
// log's help (the agent folded from its first entry).
func TestClusterRecoveryResumesFromCheckpoints(t *testing.T) {
	h := newHarness(t, jetstreamStore(t))
	root := h.create("root", "", "echo")
	kid := h.create("kid", root, "echo")
	for i := range 3 {
		h.send(root, fmt.Sprintf("hello %d", i))
		h.send(kid, fmt.Sprintf("hi %d", i))
	}
	h.quiet()
	before := map[string]string{}
	for _, id := range []string{root, kid} {
		before[id] = h.statusOf(id) + fmt.Sprint(h.c.tree.Children(id))
	}
	h.restart()
	if h.report.Resumed != 2 || h.report.Agents != 2 {
		t.Fatalf("recovery after a clean stop: %+v, want both agents resumed from their checkpoints", h.report)
	}
	for _, id := range []string{root, kid} {
		if got := h.statusOf(id) + fmt.Sprint(h.c.tree.Children(id)); got != before[id] {
			t.Fatalf("agent %s after recovery from a checkpoint: %s, want %s", id, got, before[id])
		}
	}
	// A checkpoint naming the wrong line is refused: the agent is folded.
	<-h.c.scrubbed // recovery's own checkpoint pass is over
	data, err := h.c.ckstore.Load(context.Background(), kid)
	if err != nil {
		t.Fatal(err)
	}
	bad := []byte(strings.Replace(string(data), `"seq":`, `"seq":1`, 1))
	if err := h.c.ckstore.Save(context.Background(), kid, bad); err != nil {
		t.Fatal(err)
	}
	h.c.ckpts.o.Every = -1 // Close writes none: the damaged one stays
	h.restart()
	if h.report.Resumed != 1 || h.report.Agents != 2 {
		t.Fatalf("recovery with a damaged checkpoint: %+v, want one agent resumed, the other folded", h.report)
	}
	if res := h.send(kid, "after"); res.Err != nil || !strings.Contains(res.Response, "after") {
		t.Fatalf("a turn after the fold: %+v", res)
	}
}

// TestClusterRecoveryReadsTheEndsAhead: a recovery on a cluster store
// after its predecessor's lease lapsed reads its agents' log ends ahead,
// in one request, and asks the stream leader for none of them one by
// one; the agents are recovered and serve.
func TestClusterRecoveryReadsTheEndsAhead(t *testing.T) {
	srv, nc := embeddedNATS(t)
	h := newHarness(t, func(h *harness) {
		h.store = func(faultfs.FS) store.Store { return openEmbeddedStore(t, srv, nc, "") }
	})
	var ids []string
	for i := range 5 {
		ids = append(ids, h.create(fmt.Sprint("a", i), "", "echo"))
		h.send(ids[i], "hello")
	}
	h.quiet()
	// A clean stop's successor reads the ends from the leader (it opens
	// the logs without claims, lazy.go); one after a lapse reads them ahead.
	// The store's requests go out on nc: once a flush of it returns, the
	// server has queued every earlier one for this subscription.
	sub, err := nc.SubscribeSync("$JS.API.STREAM.MSG.GET." + jetstream.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	h.restartAfterLapse(nc)
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if h.report.Agents != len(ids) {
		t.Fatalf("recovered %+v, want %d agents", h.report, len(ids))
	}
	ends := map[string]int{}
	for {
		m, err := sub.NextMsg(0)
		if err != nil {
			break // the queue is empty
		}
		var req struct {
			LastFor string `json:"last_by_subj"`
		}
		if json.Unmarshal(m.Data, &req) == nil && req.LastFor != "" {
			ends[req.LastFor]++
		}
	}
	for _, id := range ids {
		if n := ends[jetstream.Subject(id)]; n != 0 {
			t.Errorf("the recovery asked the stream leader for the end of %s %d times, want 0 (read ahead)", id, n)
		}
	}
	for _, id := range ids {
		if res := h.send(id, "again"); res.Err != nil || !strings.Contains(res.Response, "again") {
			t.Fatalf("a turn of %s after the recovery: %+v", id, res)
		}
	}
}

// restartAfterLapse stops the core, then starts the next one as after a
// holder that was cut off: the USER inbox's lease is gone without its
// release marker (lapsed and swept), so the next holder claims every log
// at its open (store/jetstream lazy.go).
func (h *harness) restartAfterLapse(nc *nats.Conn) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.c.Close(ctx); err != nil {
		h.t.Fatalf("Close: %v", err)
	}
	js, err := natsjs.New(nc)
	if err != nil {
		h.t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, jetstream.OwnersBucket)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := kv.Purge(ctx, store.UserID); err != nil {
		h.t.Fatal(err)
	}
	h.start()
}

// TestClusterCleanRestartClaimsOnlyWriters: after a clean stop the next
// core claims no agent at recovery; an agent that then runs a turn gets
// one agent.claimed, with that turn's first entry; one at rest none.
func TestClusterCleanRestartClaimsOnlyWriters(t *testing.T) {
	h := newHarness(t, jetstreamStore(t))
	busy := h.create("busy", "", "echo")
	rest := h.create("rest", "", "echo")
	h.send(busy, "hello")
	h.send(rest, "hello")
	h.quiet()
	claimsOf := func(id string) (n int, last string) {
		es, err := h.c.st.Read(context.Background(), id, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer es.Close()
		prev := ""
		for {
			e, err := es.Next()
			if err != nil {
				return n, last
			}
			if prev == schema.AgentClaimed {
				last = e.Event // what the claim went out with
			}
			if e.Event == schema.AgentClaimed {
				n++
			}
			prev = e.Event
		}
	}
	h.restart()
	for _, id := range []string{busy, rest} {
		if n, _ := claimsOf(id); n != 0 {
			t.Fatalf("after a clean restart %s holds %d agent.claimed, want none until it writes", id, n)
		}
	}
	if res := h.send(busy, "again"); res.Err != nil || !strings.Contains(res.Response, "again") {
		t.Fatalf("a turn after the clean restart: %+v", res)
	}
	h.quiet()
	if n, with := claimsOf(busy); n != 1 || with != schema.TurnStart {
		t.Fatalf("the busy agent holds %d agent.claimed (followed by %q), want 1, with its turn.start", n, with)
	}
	if n, _ := claimsOf(rest); n != 0 {
		t.Fatalf("the agent at rest holds %d agent.claimed, want none", n)
	}
}
