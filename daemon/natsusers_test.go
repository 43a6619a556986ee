//go:build !nocluster

package daemon

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider/remote"
	"github.com/warren-dev/warren/store/jetstream/natsembed"
)

// natsWorld is an embedded server with the daemon's users (natsUsers):
// the daemon's key made at its start, and tokens issued after.
type natsWorld struct {
	t      *testing.T
	url    string
	keys   string // the workers.json
	daemon ed25519.PrivateKey
	srv    *server.Server
}

func newNatsWorld(t *testing.T) *natsWorld {
	t.Helper()
	w := &natsWorld{t: t, keys: filepath.Join(t.TempDir(), remote.KeysFile)}
	var err error
	if w.daemon, _, err = remote.DaemonKey(faultfs.OS{}, w.keys); err != nil {
		t.Fatal(err)
	}
	keys := func() (remote.Keys, error) { return remote.LoadKeys(faultfs.OS{}, w.keys) }
	srv, err := natsembed.Start(natsembed.Options{Name: "n1", Dir: t.TempDir(), Port: -1, UnsafeLazyFsync: true,
		Users: natsUsers(w.daemon, keys, hclog.NewNullLogger())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	w.url, w.srv = srv.ClientURL(), srv
	return w
}

// worker issues id's token now (the server is running) and returns its
// key.
func (w *natsWorld) worker(id string) ed25519.PrivateKey {
	w.t.Helper()
	tok, err := remote.IssueToken(faultfs.OS{}, w.keys, id)
	if err != nil {
		w.t.Fatal(err)
	}
	key, _, err := remote.ParseToken(tok)
	if err != nil {
		w.t.Fatal(err)
	}
	return key
}

// violations collects a connection's asynchronous errors (the servers
// report a permissions violation that way).
type violations struct {
	mu   sync.Mutex
	errs []string
	more chan struct{} // a new error (buffered, one)
}

func newViolations() *violations { return &violations{more: make(chan struct{}, 1)} }

func (v *violations) handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	v.mu.Lock()
	v.errs = append(v.errs, err.Error())
	v.mu.Unlock()
	select {
	case v.more <- struct{}{}:
	default:
	}
}

// saw reports whether a permissions violation naming subj was reported.
func (v *violations) saw(subj string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, e := range v.errs {
		if strings.Contains(strings.ToLower(e), "permissions violation") && strings.Contains(e, subj) {
			return true
		}
	}
	return false
}

// all is every error reported so far.
func (v *violations) all() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.errs)
}

// wait waits until a violation naming subj is reported, or ctx ends.
func (v *violations) wait(ctx context.Context, subj string) error {
	for !v.saw(subj) {
		select {
		case <-v.more:
		case <-ctx.Done():
			v.mu.Lock()
			defer v.mu.Unlock()
			return fmt.Errorf("no permissions violation reported for %s; reported: %v", subj, v.errs)
		}
	}
	return nil
}

func (w *natsWorld) connect(key ed25519.PrivateKey, v *violations, opts ...nats.Option) *nats.Conn {
	w.t.Helper()
	if v != nil {
		opts = append(opts, nats.ErrorHandler(v.handler))
	}
	nc, err := natsembed.Connect(w.url, key, opts...)
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(nc.Close)
	return nc
}

// TestEmbeddedServerLetsInOnlyItsUsers: a client without a key, or with
// a key neither the daemon's nor a worker's, is refused; the daemon's
// key and a token issued while the server runs are let in.
func TestEmbeddedServerLetsInOnlyItsUsers(t *testing.T) {
	w := newNatsWorld(t)
	if nc, err := nats.Connect(w.url); err == nil {
		nc.Close()
		t.Fatal("a client without a key was let in")
	} else if !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("a client without a key: %v; want an authorization error", err)
	}
	_, stranger, _ := ed25519.GenerateKey(rand.Reader)
	if nc, err := natsembed.Connect(w.url, stranger); err == nil {
		nc.Close()
		t.Fatal("a client with an unknown key was let in")
	} else if !strings.Contains(err.Error(), "workers.json") {
		t.Fatalf("the refusal of an unknown key does not say what to do: %v", err)
	}
	w.connect(w.daemon, nil)
	w.connect(w.worker("w1"), nil)
}

// TestWorkerHeldToItsOwnSubjects: a worker's key serves its own
// subjects (its beats and bucket key, its service and the answers to the
// requests made to it, its attempts' traffic, its inbox) and nothing
// else: not the logs' stream, not another worker's service or attempts,
// not the daemon's inbox.
func TestWorkerHeldToItsOwnSubjects(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w := newNatsWorld(t)
	d := w.connect(w.daemon, nil)
	djs, err := jetstream.New(d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := djs.CreateStream(ctx, jetstream.StreamConfig{Name: "WARREN", Subjects: []string{"warren.log.>"}}); err != nil {
		t.Fatal(err)
	}
	v := newViolations()
	wk := w.connect(w.worker("w1"), v, nats.CustomInboxPrefix(remote.InboxPrefix("w1")))

	// What a worker does, allowed: bind the bucket the daemon made, put
	// its key.
	if _, err := djs.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: remote.Bucket, History: 1, TTL: remote.BucketTTL}); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(wk)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, remote.Bucket)
	if err != nil {
		t.Fatalf("binding the workers' bucket: %v (%v)", err, v.all())
	}
	if _, err := kv.Put(ctx, "w1", []byte("{}")); err != nil {
		t.Fatalf("putting its own key: %v", err)
	}
	// A put whose reply subject is a JetStream request: the stream's
	// acknowledgement must not act as one.
	trick := nats.NewMsg("$KV." + remote.Bucket + ".w1")
	trick.Reply, trick.Data = "$JS.API.STREAM.DELETE.WARREN", []byte("{}")
	if err := wk.PublishMsg(trick); err != nil {
		t.Fatal(err)
	}
	if err := wk.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "w1", []byte("{}")); err != nil { // after the trick's ack, in the stream's order
		t.Fatal(err)
	}
	// Refused: the servers drop the publish, so the put gets no answer.
	pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
	defer pcancel()
	if _, err := kv.Put(pctx, "w2", []byte("{}")); err == nil {
		t.Fatal("a worker put another worker's key")
	}
	if err := v.wait(ctx, "$KV."+remote.Bucket+".w2"); err != nil {
		t.Fatal(err)
	}
	// Its service answers the daemon; the daemon answers its tool call.
	if _, err := wk.Subscribe(remote.WorkerSubject("w1", remote.OpPing), func(m *nats.Msg) { _ = m.Respond([]byte("pong")) }); err != nil {
		t.Fatal(err)
	}
	if err := wk.Flush(); err != nil {
		t.Fatal(err)
	}
	if m, err := d.Request(remote.WorkerSubject("w1", remote.OpPing), nil, 5*time.Second); err != nil || string(m.Data) != "pong" {
		t.Fatalf("the daemon's request to the worker: %v, %v", m, err)
	}
	tool := remote.AttemptSubject("boot1", "w1", "a1", remote.KindTool)
	if _, err := d.Subscribe(tool, func(m *nats.Msg) { _ = m.Respond([]byte("ok")) }); err != nil {
		t.Fatal(err)
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	if m, err := wk.Request(tool, nil, 5*time.Second); err != nil || string(m.Data) != "ok" {
		t.Fatalf("the worker's tool call: %v, %v", m, err)
	}

	// What it may not do.
	for _, subj := range []string{"warren.log.a1", remote.AttemptSubject("boot1", "w2", "a1", remote.KindChunk), "$JS.API.STREAM.DELETE.WARREN",
		remote.WorkerSubject("w2", remote.OpPing), "$JS.API.STREAM.CREATE.KV_" + remote.Bucket} {
		if err := wk.Publish(subj, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	for _, subj := range []string{"_INBOX.>", remote.WorkerSubject("w2", remote.OpOpen), "warren.attempt.>", "warren.log.>"} {
		if _, err := wk.Subscribe(subj, func(*nats.Msg) {}); err != nil {
			t.Fatal(err)
		}
	}
	if err := wk.Flush(); err != nil {
		t.Fatal(err)
	}
	want := []string{"Publish to \"warren.log.a1\"", "Publish to \"$JS.API.STREAM.DELETE.WARREN\"", "Publish to \"" + remote.WorkerSubject("w2", remote.OpPing) + "\"",
		"Publish to \"$JS.API.STREAM.CREATE.KV_" + remote.Bucket + "\"", "Publish to \"" + remote.AttemptSubject("boot1", "w2", "a1", remote.KindChunk) + "\"",
		"Subscription to \"_INBOX.>\"", "Subscription to \"" + remote.WorkerSubject("w2", remote.OpOpen) + "\"", "Subscription to \"warren.attempt.>\"",
		"Subscription to \"warren.log.>\""}
	for _, subj := range want {
		if err := v.wait(ctx, subj); err != nil {
			t.Fatal(err)
		}
	}
	info, err := djs.Stream(ctx, "WARREN")
	if err != nil {
		t.Fatal(err)
	}
	if n := info.CachedInfo().State.Msgs; n != 0 {
		t.Fatalf("the logs' stream holds %d messages a worker published", n)
	}
}

// TestTokenIssuedAgainDropsTheOldConnection: once a worker's token is
// issued again, the connection it made with its old key is dropped when
// the daemon sees the keys file change (watchKeys), and it cannot sign in
// with that key again; the daemon's connection and another worker's stay.
// A keys file that cannot be read drops nobody.
func TestTokenIssuedAgainDropsTheOldConnection(t *testing.T) {
	w := newNatsWorld(t)
	unreadable := make(chan struct{}, 1)
	log := hclog.New(&hclog.LoggerOptions{Output: lineSignal{"cannot read the workers' keys", unreadable}})
	stop := watchKeys(w.srv, faultfs.OS{}, w.keys, w.daemon, log)
	defer stop()
	old, other := w.worker("w1"), w.worker("w2")
	closed := map[string]chan struct{}{}
	connect := func(name string, key ed25519.PrivateKey) *nats.Conn {
		ch := make(chan struct{})
		closed[name] = ch
		nc, err := natsembed.Connect(w.url, key, nats.NoReconnect(), nats.ClosedHandler(func(*nats.Conn) { close(ch) }))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	w1 := connect("w1", old)
	w2 := connect("w2", other)
	daemon := connect("daemon", w.daemon)
	alive := func(when string, conns map[string]*nats.Conn) {
		t.Helper()
		for name, nc := range conns {
			if err := nc.Flush(); err != nil || nc.IsClosed() {
				t.Errorf("%s: %s's connection was dropped: %v", when, name, err)
			}
		}
	}
	// A file that does not parse (a hand edit half saved): nobody goes.
	good, err := os.ReadFile(w.keys)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(w.keys, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case <-unreadable:
	case <-time.After(10 * keysPoll):
		t.Fatal("the watch did not report the unreadable keys file")
	}
	alive("with the keys file unreadable", map[string]*nats.Conn{"w1": w1, "w2": w2, "daemon": daemon})
	if err := os.WriteFile(w.keys, good, 0o600); err != nil {
		t.Fatal(err)
	}
	w.worker("w1") // issued again: a new key in workers.json
	select {
	case <-closed["w1"]:
	case <-time.After(10 * keysPoll):
		t.Fatalf("w1's old connection still open %s after its token was issued again", 10*keysPoll)
	}
	alive("after w1's token was issued again", map[string]*nats.Conn{"w2": w2, "daemon": daemon})
	if nc, err := natsembed.Connect(w.url, old, nats.NoReconnect()); err == nil {
		nc.Close()
		t.Fatal("the old key signed in again")
	}
}

// lineSignal is a log output that signals (without blocking) when a line
// holds its text.
type lineSignal struct {
	text string
	ch   chan struct{}
}

func (l lineSignal) Write(p []byte) (int, error) {
	if strings.Contains(string(p), l.text) {
		select {
		case l.ch <- struct{}{}:
		default:
		}
	}
	return len(p), nil
}
