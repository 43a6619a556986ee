package remote_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/warren-dev/warren/config"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/provider/remote"
	"github.com/warren-dev/warren/store/jetstream/natsembed"
	"github.com/warren-dev/warren/worker"
)

// world is a NATS server, a daemon's Directory and its local inproc
// provider, and workers in this process.
type world struct {
	t      *testing.T
	keysMu sync.Mutex
	keys   map[string]ed25519.PublicKey
	daemon ed25519.PrivateKey // the daemon's key (Keys.Daemon)
	url    string
	dir    *remote.Directory
	local  *inproc.Provider
	remote *inproc.Provider // the workers' provider (shared: one process)
}

func newWorld(t *testing.T) *world {
	t.Helper()
	srv, err := natsembed.Start(natsembed.Options{Name: "n1", Dir: t.TempDir(), Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	_, daemonKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, url: srv.ClientURL(), local: inproc.New("inproc", inproc.Options{}), remote: inproc.New("inproc", inproc.Options{}),
		keys: map[string]ed25519.PublicKey{}, daemon: daemonKey}
	nc := w.conn()
	w.dir, err = remote.NewDirectory(t.Context(), remote.DirectoryOptions{Conn: nc, Daemon: "daemon1", Keys: func() (remote.Keys, error) {
		w.keysMu.Lock()
		defer w.keysMu.Unlock()
		return remote.Keys{Daemon: w.daemon, Workers: maps.Clone(w.keys)}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.dir.Close)
	for _, p := range []*inproc.Provider{w.local, w.remote} {
		p.Register("echo", inproc.Echo)
		p.Register("tooly", func(ctx context.Context, tn *inproc.Turn) (string, error) {
			tn.Chunk("thinking ")
			if err := tn.Request(provider.Usage{InputTokens: 10, OutputTokens: 2}); err != nil {
				return "", err
			}
			res, err := tn.Call("ping", map[string]any{"n": 1})
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("pong %v (history %d)", res["pong"], len(tn.History)), nil
		})
		p.Register("block", func(ctx context.Context, tn *inproc.Turn) (string, error) {
			tn.Chunk("started")
			<-ctx.Done()
			return "", ctx.Err()
		})
	}
	return w
}

func (w *world) conn(opts ...nats.Option) *nats.Conn {
	nc, err := nats.Connect(w.url, opts...)
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(nc.Close)
	return nc
}

// startWorker runs a worker with pool inproc=size until the returned
// stop; it returns once the directory lists it.
func (w *world) startWorker(id string, size int, labels map[string]string) (stop func()) {
	w.t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		w.t.Fatal(err)
	}
	w.keysMu.Lock()
	w.keys[id] = pub
	w.keysMu.Unlock()
	wk, err := worker.New(worker.Options{ID: id, Key: priv, DaemonKey: w.daemon.Public().(ed25519.PublicKey), Conn: w.conn(nats.CustomInboxPrefix(remote.InboxPrefix(id))), Pools: map[string]int{"inproc": size}, Labels: labels,
		Lookup: func(name string) (provider.Provider, bool) { return w.remote, name == "inproc" },
		Config: config.Default, Dir: w.t.TempDir()})
	if err != nil {
		w.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- wk.Run(ctx) }()
	wctx, wcancel := context.WithTimeout(w.t.Context(), 30*time.Second)
	defer wcancel()
	if err := w.dir.Wait(wctx, func(ws []remote.Worker) bool { return has(ws, id, wk.Boot()) }); err != nil {
		w.t.Fatalf("worker %s not listed: %v", id, err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				w.t.Errorf("worker %s: %v", id, err)
			}
		})
	}
	w.t.Cleanup(stop)
	return stop
}

func has(ws []remote.Worker, id, boot string) bool {
	for _, x := range ws {
		if x.ID == id && x.Boot == boot {
			return true
		}
	}
	return false
}

// tools answers "ping" and counts the calls.
type tools struct {
	mu    sync.Mutex
	calls []map[string]any
	err   error
}

func (tl *tools) CallTool(_ context.Context, tool string, args map[string]any) (map[string]any, error) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.calls = append(tl.calls, args)
	if tl.err != nil {
		return nil, tl.err
	}
	return map[string]any{"pong": fmt.Sprint(tool, len(tl.calls))}, nil
}

func spec(agent, model string) provider.Spec {
	return provider.Spec{AgentID: agent, Model: model, Instructions: "test"}
}

// TestSendThroughAWorker: a session placed on a worker streams its
// chunks and usage, runs its tool call at the daemon, suspends, and is
// restored (on the worker again) with its history.
func TestSendThroughAWorker(t *testing.T) {
	w := newWorld(t)
	w.startWorker("w1", 2, nil)
	p := w.dir.Wrap("inproc", w.local, nil)
	s, err := p.Create(t.Context(), spec("a1", "tooly"))
	if err != nil {
		t.Fatal(err)
	}
	rs, ok := s.(*remote.Session)
	if !ok || rs.Worker() != "w1" {
		t.Fatalf("session %T is not on w1", s)
	}
	var chunks []string
	var usage []provider.Usage
	tl := &tools{}
	gates := 0
	resp, err := s.Send(t.Context(), "go", provider.TurnIO{Tools: tl, OnChunk: func(c string) { chunks = append(chunks, c) },
		OnUsage: func(u provider.Usage) { usage = append(usage, u) }, BeforeRequest: func() error { gates++; return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if resp != "pong ping1 (history 0)" || strings.Join(chunks, "|") != "thinking " || len(tl.calls) != 1 || tl.calls[0]["n"] != float64(1) ||
		len(usage) != 1 || usage[0].InputTokens != 10 || gates != 1 {
		t.Fatalf("response %q, chunks %q, calls %v, usage %v, gates %d", resp, chunks, tl.calls, usage, gates)
	}
	if w.local.Sends() != 0 || w.remote.Sends() != 1 {
		t.Fatalf("sends: local %d, worker %d; want the turn on the worker", w.local.Sends(), w.remote.Sends())
	}
	blob, err := s.Suspend(t.Context())
	if err != nil || len(blob) == 0 {
		t.Fatalf("suspend: %q %v", blob, err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	hist := []provider.Turn{{Message: "go", Calls: []provider.ToolCall{{ID: "c1", Tool: "ping", Args: map[string]any{"n": 1}, Result: map[string]any{"pong": "ping1"}}}, Response: resp}}
	sp := spec("a1", "tooly")
	sp.History = hist
	s2, err := p.Restore(t.Context(), sp, blob, "")
	if err != nil {
		t.Fatal(err)
	}
	if rs, ok := s2.(*remote.Session); !ok || rs.Worker() != "w1" {
		t.Fatalf("restored session %T is not on w1", s2)
	}
	if resp, err := s2.Send(t.Context(), "again", provider.TurnIO{Tools: tl}); err != nil || resp != "pong ping2 (history 1)" {
		t.Fatalf("after restore: %q %v", resp, err)
	}
	_ = s2.Stop()
}

// TestLocalWhenNoWorkerHasRoom: a pool's slots are the worker's size;
// past it, and for labels no worker has, sessions open locally.
func TestLocalWhenNoWorkerHasRoom(t *testing.T) {
	w := newWorld(t)
	w.startWorker("w1", 1, map[string]string{"zone": "lab"})
	p := w.dir.Wrap("inproc", w.local, nil)
	s1, err := p.Create(t.Context(), spec("a1", "echo"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s1.(*remote.Session); !ok {
		t.Fatalf("first session %T: want it on the worker", s1)
	}
	s2, err := p.Create(t.Context(), spec("a2", "echo"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s2.(*remote.Session); ok {
		t.Fatal("second session on the worker: its one slot is taken")
	}
	if err := s1.Stop(); err != nil {
		t.Fatal(err)
	}
	s3, err := p.Create(t.Context(), spec("a3", "echo"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s3.(*remote.Session); !ok {
		t.Fatal("a stopped session's slot was not given back")
	}
	other := w.dir.Wrap("inproc", w.local, map[string]string{"zone": "prod"})
	s4, err := other.Create(t.Context(), spec("a4", "echo"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s4.(*remote.Session); ok {
		t.Fatal("a session asking for zone=prod was placed on a zone=lab worker")
	}
	if ws := w.dir.Workers(); len(ws) != 1 || ws[0].Placed["inproc"] != 1 {
		t.Fatalf("workers %+v: want w1 with one placed session", ws)
	}
}

// TestLostWorkerMidTurn: a worker that stops mid-turn ends the attempt
// with a transient error and the session reports Lost; a new session
// prefers another worker.
func TestLostWorkerMidTurn(t *testing.T) {
	w := newWorld(t)
	stop := w.startWorker("w1", 2, nil)
	p := w.dir.Wrap("inproc", w.local, nil)
	s, err := p.Create(t.Context(), spec("a1", "block"))
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{}, 1)
	errc := make(chan error, 1)
	go func() {
		_, err := s.Send(t.Context(), "go", provider.TurnIO{OnChunk: func(string) { started <- struct{}{} }})
		errc <- err
	}()
	<-started
	stop()
	err = <-errc
	if transient, _ := provider.IsTransient(err); !transient || !s.(provider.Lost).Lost() {
		t.Fatalf("send on a stopped worker: %v (transient %v, lost %v); want a transient error and a lost session", err, transient, s.(provider.Lost).Lost())
	}
	// The worker's leaving beat may reach the directory after the
	// attempt's "lost" answer: wait for it (bounded).
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := w.dir.Wait(ctx, func(ws []remote.Worker) bool { return len(ws) == 0 }); err != nil {
		t.Fatalf("workers after the stop: %+v (%v)", w.dir.Workers(), err)
	}
	_ = s.Stop()
}

// TestRunSuspendedCrossesTheWire: a tool call that suspends the run ends
// the turn on the worker, and Send returns provider.ErrRunSuspended.
func TestRunSuspendedCrossesTheWire(t *testing.T) {
	w := newWorld(t)
	w.startWorker("w1", 2, nil)
	p := w.dir.Wrap("inproc", w.local, nil)
	s, err := p.Create(t.Context(), spec("a1", "tooly"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	_, err = s.Send(t.Context(), "go", provider.TurnIO{Tools: &tools{err: fmt.Errorf("waiting: %w", provider.ErrRunSuspended)}})
	if !errors.Is(err, provider.ErrRunSuspended) {
		t.Fatalf("send: %v; want it to wrap ErrRunSuspended", err)
	}
}

// TestLateTrafficDropped: what arrives for an attempt the daemon does
// not run is dropped, counted, and a request among it is answered
// "abandoned" (its tool never runs).
func TestLateTrafficDropped(t *testing.T) {
	w := newWorld(t)
	nc := w.conn(nats.CustomInboxPrefix(remote.InboxPrefix("w9")))
	if answer := sendAs(t, nc, "w9", remote.NewAttemptID(), "late"); !strings.Contains(answer, `"kind":"abandoned"`) {
		t.Fatalf("late tool call answered %s; want abandoned", answer)
	}
	if n := w.dir.Dropped(); n != 2 {
		t.Fatalf("dropped %d messages, want 2 (the chunk, the call)", n)
	}
}

// sendAs publishes, as worker on attempt att of daemon1, a chunk of text
// and then a tool call, and returns the call's answer.
func sendAs(t *testing.T, nc *nats.Conn, worker, att, text string) string {
	t.Helper()
	chunk := nats.NewMsg(remote.AttemptSubject("daemon1", worker, att, remote.KindChunk))
	chunk.Data = []byte(`{"seq":1,"text":"` + text + `"}`)
	if err := nc.PublishMsg(chunk); err != nil {
		t.Fatal(err)
	}
	call := nats.NewMsg(remote.AttemptSubject("daemon1", worker, att, remote.KindTool))
	call.Data = []byte(`{"tool":"ping","args":{}}`)
	m, err := nc.RequestMsgWithContext(t.Context(), call)
	if err != nil {
		t.Fatal(err)
	}
	return string(m.Data)
}

// TestTrafficNamingAnotherWorkerDropped: on a live attempt, a chunk or
// a tool call whose subject names another worker than the attempt's is
// dropped (the servers let a worker publish only under its own id, so
// the subject is the sender), and the call is answered "abandoned"; a
// call whose reply subject is not its worker's inbox is dropped
// unanswered (the daemon, which may publish anywhere, would otherwise
// publish where the worker may not).
func TestTrafficNamingAnotherWorkerDropped(t *testing.T) {
	w := newWorld(t)
	w.startWorker("w1", 2, nil)
	nc := w.conn(nats.CustomInboxPrefix(remote.InboxPrefix("w2")))
	attempts := make(chan string, 4)
	if _, err := nc.Subscribe("warren.attempt.daemon1.w1.*.chunk", func(m *nats.Msg) { attempts <- strings.Split(m.Subject, ".")[4] }); err != nil {
		t.Fatal(err)
	}
	stolen, err := nc.SubscribeSync("steal.me")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	p := w.dir.Wrap("inproc", w.local, nil)
	s, err := p.Create(t.Context(), spec("a1", "block"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	ctx, cancel := context.WithCancel(t.Context())
	var mu sync.Mutex
	var got []string
	tl := &tools{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = s.Send(ctx, "go", provider.TurnIO{Tools: tl, OnChunk: func(c string) { mu.Lock(); got = append(got, c); mu.Unlock() }})
	}()
	att := <-attempts
	before := w.dir.Dropped()
	// The attempt's own worker's subject, with a reply elsewhere.
	aside := nats.NewMsg(remote.AttemptSubject("daemon1", "w1", att, remote.KindTool))
	aside.Reply, aside.Data = "steal.me", []byte(`{"tool":"ping","args":{}}`)
	if err := nc.PublishMsg(aside); err != nil {
		t.Fatal(err)
	}
	if answer := sendAs(t, nc, "w2", att, "forged"); !strings.Contains(answer, `"kind":"abandoned"`) {
		t.Fatalf("a tool call naming another worker was answered %s; want abandoned", answer)
	}
	// The router handles its messages in order and the daemon's
	// connection publishes in order: an answer to steal.me would have
	// come before the one just received.
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := stolen.Pending(); n != 0 {
		t.Fatalf("the daemon answered on a reply subject that is not the worker's inbox (%d messages)", n)
	}
	cancel()
	<-done
	if n := w.dir.Dropped() - before; n != 3 {
		t.Fatalf("dropped %d messages, want 3 (the forged chunk, the call with a stray reply, the forged call)", n)
	}
	tl.mu.Lock()
	calls := len(tl.calls)
	tl.mu.Unlock()
	if calls != 0 {
		t.Fatalf("%d forged tool calls ran", calls)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, c := range got {
		if strings.Contains(c, "forged") {
			t.Fatalf("a chunk naming another worker reached the turn: %q", got)
		}
	}
}

// TestWorkerWithoutItsKeyGetsNothing: a worker whose beats are not signed
// with the key issued for its id is never listed, so never placed on.
func TestWorkerWithoutItsKeyGetsNothing(t *testing.T) {
	w := newWorld(t)
	w.startWorker("w1", 2, nil) // known, signed
	_, stranger, _ := ed25519.GenerateKey(rand.Reader)
	for _, id := range []string{"w1", "w2"} { // w1's id with another key; w2 with none issued
		wk, err := worker.New(worker.Options{ID: id, Key: stranger, DaemonKey: w.daemon.Public().(ed25519.PublicKey), Conn: w.conn(nats.CustomInboxPrefix(remote.InboxPrefix(id))), Pools: map[string]int{"inproc": 2},
			Lookup: func(string) (provider.Provider, bool) { return w.remote, true }, Config: config.Default, Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- wk.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
	}
	// The forged w1 beats must not replace the real boot, nor w2 join:
	// several beats of each pass while the real w1 stays the only one.
	nc := w.conn()
	sub, err := nc.SubscribeSync(remote.BeatSubject)
	if err != nil {
		t.Fatal(err)
	}
	real := w.dir.Workers()[0].Boot
	for range 9 {
		if _, err := sub.NextMsg(10 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if ws := w.dir.Workers(); len(ws) != 1 || ws[0].ID != "w1" || ws[0].Boot != real {
		t.Fatalf("workers %+v: want only the signed w1 (boot %s)", ws, real)
	}
}

// TestLocalSessionsStayHere: a spec that must run on the daemon's machine
// (a workspace, an acp agent) is never placed on a worker.
func TestLocalSessionsStayHere(t *testing.T) {
	w := newWorld(t)
	w.startWorker("w1", 4, nil)
	p := w.dir.Wrap("inproc", w.local, nil)
	sp := spec("a1", "echo")
	sp.Local = "its workspace"
	s, err := p.Create(t.Context(), sp)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.(*remote.Session); ok {
		t.Fatal("a session with a workspace was placed on a worker")
	}
}

// TestWorkerObeysOnlyItsDaemon: a request to a worker that is not
// authenticated with the key its daemon and it share (made from another
// daemon's key, or with another worker's), is for another worker, is too
// old, or replays an open, is refused.
func TestWorkerObeysOnlyItsDaemon(t *testing.T) {
	w := newWorld(t)
	w.startWorker("w1", 2, nil)
	p := w.dir.Wrap("inproc", w.local, nil)
	s, err := p.Create(t.Context(), spec("a1", "echo"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	nc := w.conn()
	w.keysMu.Lock()
	w1 := w.keys["w1"]
	w.keysMu.Unlock()
	otherPub, other, _ := ed25519.GenerateKey(rand.Reader)
	key := func(daemon ed25519.PrivateKey, worker ed25519.PublicKey) []byte {
		k, err := remote.DaemonRequestKey(daemon, worker)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	open := func(key []byte, worker string, at time.Time, req any) string {
		body, _ := json.Marshal(req)
		authed, err := remote.AuthRequest(key, worker, at, body)
		if err != nil {
			t.Fatal(err)
		}
		m, err := nc.RequestWithContext(t.Context(), remote.WorkerSubject("w1", remote.OpOpen), authed)
		if err != nil {
			t.Fatal(err)
		}
		return string(m.Data)
	}
	req := func(session string) remote.OpenRequest {
		return remote.OpenRequest{Session: session, Provider: "inproc", Daemon: "daemon1", Spec: remote.SpecOf(spec("a9", "echo"))}
	}
	for name, got := range map[string]string{
		"another daemon's key": open(key(other, w1), "w1", time.Now(), req("s1")),
		"another worker's key": open(key(w.daemon, otherPub), "w1", time.Now(), req("s5")),
		"another worker":       open(key(w.daemon, w1), "w2", time.Now(), req("s2")),
		"too old":              open(key(w.daemon, w1), "w1", time.Now().Add(-10*time.Minute), req("s3")),
	} {
		if !strings.Contains(got, `"kind":"refused"`) {
			t.Errorf("%s: answered %s, want refused", name, got)
		}
	}
	if got := open(key(w.daemon, w1), "w1", time.Now(), req("s4")); strings.Contains(got, "error") {
		t.Fatalf("an authenticated open: %s", got)
	}
	if got := open(key(w.daemon, w1), "w1", time.Now(), req("s4")); !strings.Contains(got, `"kind":"refused"`) {
		t.Fatalf("the same open again (a replay): %s, want refused", got)
	}
	// Bare: not even parsed as a request.
	m, err := nc.RequestWithContext(t.Context(), remote.WorkerSubject("w1", remote.OpStop), []byte(`{"session":"s4"}`))
	if err != nil || !strings.Contains(string(m.Data), `"kind":"refused"`) {
		t.Fatalf("a bare stop: %s %v, want refused", m.Data, err)
	}
}

// TestBucketRefusesARollup: a put with a rollup header, which would purge
// every other worker's key and no subject permission can refuse, is
// refused by the workers' bucket the daemon makes; the other keys stay.
func TestBucketRefusesARollup(t *testing.T) {
	w := newWorld(t)
	w.startWorker("w1", 1, nil)
	w.startWorker("w2", 1, nil)
	nc := w.conn()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	beats, err := nc.SubscribeSync(remote.BeatSubject)
	if err != nil {
		t.Fatal(err)
	}
	// The daemon makes the bucket after a beat verifies, then refuses
	// rollups on it; the beats (about one a second each) pace the wait.
	var kv jetstream.KeyValue
	for i := 0; ; i++ {
		if i == 30 {
			t.Fatal("the workers' bucket was not made, with both keys and no rollups, within 30 beats")
		}
		if _, err := beats.NextMsg(10 * time.Second); err != nil {
			t.Fatal(err)
		}
		if kv, err = js.KeyValue(t.Context(), remote.Bucket); err != nil {
			continue
		}
		st, err := js.Stream(t.Context(), "KV_"+remote.Bucket)
		if err != nil || st.CachedInfo().Config.AllowRollup {
			continue
		}
		if _, err := kv.Get(t.Context(), "w2"); err == nil {
			break
		}
	}
	m := nats.NewMsg("$KV." + remote.Bucket + ".w1")
	m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupAll)
	m.Data = []byte(`{}`)
	if _, err := js.PublishMsg(t.Context(), m); err == nil {
		t.Fatal("a put with Nats-Rollup: all was taken")
	}
	if _, err := kv.Get(t.Context(), "w2"); err != nil {
		t.Fatalf("w2's key after the refused rollup: %v", err)
	}
}
