package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/bus"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/schema"
)

// fakeSource is a set of logs in memory with a live stream.
type fakeSource struct {
	mu    sync.Mutex
	logs  map[string][]eventlog.Entry
	roots map[string]bool
	b     *bus.Bus
	reads map[string]uint64 // the fromSeq of each log's last Read
}

func newSource() *fakeSource {
	return &fakeSource{logs: map[string][]eventlog.Entry{"USER": nil}, roots: map[string]bool{"lead": true}, b: bus.New(), reads: map[string]uint64{}}
}

func (s *fakeSource) add(log, event string, data any) eventlog.Entry {
	raw, _ := json.Marshal(data)
	s.mu.Lock()
	e := eventlog.Entry{Seq: uint64(len(s.logs[log]) + 1), TS: time.Now(), Event: event, Data: raw}
	s.logs[log] = append(s.logs[log], e)
	s.mu.Unlock()
	s.b.Publish(log, []eventlog.Entry{e})
	return e
}

func (s *fakeSource) wait(log, token string) eventlog.Entry {
	return s.add(log, schema.RunWaiting, schema.RunWaitingData{RunID: "r", WaitKind: "approval", Prompt: "ship " + token + "?", TokenID: token, SecretHash: "h"})
}

func (s *fakeSource) Path(id string) string                 { return "p/" + id }
func (s *fakeSource) IsRoot(id string) bool                 { return s.roots[id] }
func (s *fakeSource) Subscribe() (<-chan bus.Event, func()) { return s.b.Subscribe("") }
func (s *fakeSource) Logs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for l := range s.logs {
		out = append(out, l)
	}
	return out
}
func (s *fakeSource) Read(_ context.Context, log string, from uint64, fn func(eventlog.Entry) error) error {
	s.mu.Lock()
	s.reads[log] = from
	es := append([]eventlog.Entry(nil), s.logs[log]...)
	s.mu.Unlock()
	for _, e := range es {
		if e.Seq >= from {
			if err := fn(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// testSink records what it took; fail makes it refuse, hang makes it
// wait for its context.
type testSink struct {
	name string
	mu   sync.Mutex
	got  []Notification
	fail bool
	hang bool
	sent chan Notification
}

func newSink(name string) *testSink { return &testSink{name: name, sent: make(chan Notification, 100)} }

func (s *testSink) Name() string { return s.name }
func (s *testSink) Send(ctx context.Context, n Notification) error {
	s.mu.Lock()
	fail, hang := s.fail, s.hang
	s.mu.Unlock()
	if hang {
		<-ctx.Done()
		return ctx.Err()
	}
	if fail {
		return errors.New("refused")
	}
	s.mu.Lock()
	s.got = append(s.got, n)
	s.mu.Unlock()
	s.sent <- n
	return nil
}

func (s *testSink) next(t *testing.T) Notification {
	t.Helper()
	select {
	case n := <-s.sent:
		return n
	case <-time.After(10 * time.Second):
		t.Fatalf("sink %s got nothing", s.name)
		return Notification{}
	}
}

// pastSince writes a notify.jsonl whose notifications began long ago, so
// every entry a test adds is notified.
func pastSince(t *testing.T, fsys faultfs.FS) {
	t.Helper()
	f, err := fsys.OpenFile("/h/notify.jsonl", os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.Write([]byte(`{"mark":{},"since":"2000-01-01T00:00:00Z","ts":"2000-01-01T00:00:00Z"}` + "\n"))
	f.Close()
}

// run starts a notifier and returns the function that stops it.
func run(t *testing.T, fsys faultfs.FS, src Source, o Options, sinks ...Sink) (*Notifier, func()) {
	t.Helper()
	o.Sinks, o.FS, o.Home, o.Source, o.Logger = sinks, fsys, "/h", src, hclog.NewNullLogger()
	n := New(o)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	stop := func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	t.Cleanup(func() { cancel() })
	return n, stop
}

func newFS(t *testing.T) *faultfs.Mem {
	fsys := faultfs.NewMem()
	if err := fsys.MkdirAll("/h", 0o700); err != nil {
		t.Fatal(err)
	}
	return fsys
}

func TestClassify(t *testing.T) {
	src := newSource()
	e := func(event string, data any) eventlog.Entry {
		raw, _ := json.Marshal(data)
		return eventlog.Entry{Seq: 7, TS: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC), Event: event, Data: raw}
	}
	n, ok := classify("a1", e(schema.RunWaiting, schema.RunWaitingData{WaitKind: "permission", Prompt: "run rm?", TokenID: "tid", SecretHash: "secret-hash"}), src, "")
	if !ok || n.ID != "a1:7" || n.Kind != "run.waiting" || n.WaitKind != "permission" || n.TokenID != "tid" ||
		n.Command != "warren agent resume p/a1 --token-id tid RESPONSE" || n.Path != "p/a1" || n.TS != "2026-11-29T10:00:00.000Z" {
		t.Errorf("run.waiting: %+v, %v", n, ok)
	}
	if b, _ := json.Marshal(n); strings.Contains(string(b), "secret-hash") {
		t.Error("the notification carries the secret's hash")
	}
	if n, ok := classify("a1", e(schema.TurnFailed, schema.TurnFailedData{Error: "boom\nline"}), src, ""); !ok || n.Text != "boom line" || n.Command != "warren logs p/a1" {
		t.Errorf("turn.failed: %+v", n)
	}
	if n, ok := classify("a1", e(schema.RunInterrupted, schema.RunInterruptedData{Reason: "shutdown"}), src, HomeArg("/h w")); !ok || !strings.Contains(n.Text, "shutdown") || n.Command != "warren agent resume p/a1 --home '/h w'" {
		t.Errorf("run.interrupted: %+v", n)
	}
	msg := func(sender string) eventlog.Entry {
		return e(inbox.EventEnqueued, map[string]any{"message_id": "m", "sender": sender, "recipient": "USER", "kind": "notification", "payload": strings.Repeat("x", 400)})
	}
	if n, ok := classify("USER", msg("lead"), src, ""); !ok || n.Kind != KindMessage || n.AgentID != "lead" || n.ID != "USER:7" || len([]rune(n.Text)) != maxText {
		t.Errorf("a root's message: %+v, %v", n, ok)
	}
	for _, sender := range []string{"w1", "SYSTEM"} {
		if _, ok := classify("USER", msg(sender), src, ""); ok {
			t.Errorf("a message from %s is notified", sender)
		}
	}
	if _, ok := classify("a1", e(schema.TurnComplete, map[string]any{}), src, ""); ok {
		t.Error("turn.complete is notified")
	}
}

// TestDeliveredOnceToEachSinkAcrossARestart: a sink that fails does not
// hold the other; after a restart the failing one (now working) gets the
// same notification, with the same id, and the other does not get it
// again.
func TestDeliveredOnceToEachSinkAcrossARestart(t *testing.T) {
	fsys, src := newFS(t), newSource()
	pastSince(t, fsys)
	good, bad := newSink("good"), newSink("bad")
	bad.fail = true
	_, stop := run(t, fsys, src, Options{}, good, bad)
	e := src.wait("a1", "t1")
	if n := good.next(t); n.ID != fmt.Sprintf("a1:%d", e.Seq) || n.TokenID != "t1" {
		t.Fatalf("good got %+v", n)
	}
	stop()

	bad2, good2 := newSink("bad"), newSink("good")
	_, stop = run(t, fsys, src, Options{}, good2, bad2)
	defer stop()
	if n := bad2.next(t); n.ID != fmt.Sprintf("a1:%d", e.Seq) {
		t.Fatalf("after the restart the sink that failed got %+v", n)
	}
	src.wait("a1", "t2") // a later one reaches both: good2 got nothing before it
	if n := good2.next(t); n.TokenID != "t2" {
		t.Fatalf("the sink that had acknowledged got %+v again", n)
	}
}

// TestAHangingSinkHoldsNothing: a sink that never answers leaves the
// others and the logs' writers alone; its full queue drops (counted) and
// what it dropped comes again after a restart.
func TestAHangingSinkHoldsNothing(t *testing.T) {
	fsys, src := newFS(t), newSource()
	pastSince(t, fsys)
	good, hung := newSink("good"), newSink("hung")
	hung.hang = true
	// hung first: a notification is offered to the sinks' queues in this
	// order, so once good has it, hung's queue has taken or dropped it.
	n, stop := run(t, fsys, src, Options{QueueLen: 2}, hung, good)
	for i := range 6 {
		src.wait("a1", fmt.Sprint("t", i))
		good.next(t)
	}
	var st Stats
	for _, s := range n.Stats().Sinks {
		if s.Name == "hung" && s.Dropped >= 3 {
			st = n.Stats()
		}
	}
	if st.Sinks == nil {
		t.Fatalf("the hanging sink's full queue dropped nothing: %+v", n.Stats())
	}
	stop()
	again := newSink("hung")
	_, stop = run(t, fsys, src, Options{}, newSink("good"), again)
	defer stop()
	seen := map[string]bool{}
	for range 6 {
		seen[again.next(t).TokenID] = true
	}
	if len(seen) != 6 {
		t.Fatalf("after the restart the sink got %v, want all 6", seen)
	}
}

// TestTheMarkSkipsWhatWasDelivered: once every sink acknowledged, the mark
// moves past, and the next start reads each log only after it.
func TestTheMarkSkipsWhatWasDelivered(t *testing.T) {
	fsys, src := newFS(t), newSource()
	pastSince(t, fsys)
	s := newSink("s")
	_, stop := run(t, fsys, src, Options{MarkEvery: time.Hour}, s)
	for i := range 3 {
		src.wait("a1", fmt.Sprint("t", i))
		s.next(t)
	}
	stop() // writes the mark
	lines, err := Log(fsys, "/h/notify.jsonl", 0)
	if err != nil {
		t.Fatal(err)
	}
	if last := string(lines[len(lines)-1]); !strings.Contains(last, `"mark":{"a1":3}`) {
		t.Fatalf("the last line of notify.jsonl: %s", last)
	}
	s2 := newSink("s")
	_, stop = run(t, fsys, src, Options{}, s2)
	src.wait("a1", "t9")
	if n := s2.next(t); n.TokenID != "t9" {
		t.Fatalf("after the restart the sink got %+v, want only the new wait", n)
	}
	stop()
	src.mu.Lock()
	defer src.mu.Unlock()
	if src.reads["a1"] != 4 {
		t.Fatalf("the restart read a1 from %d, want 4 (after the mark)", src.reads["a1"])
	}
}

// TestTheFirstStartNotifiesNothingOlder: without notify.jsonl, entries
// logged before the notifier started are history, not news.
func TestTheFirstStartNotifiesNothingOlder(t *testing.T) {
	fsys, src := newFS(t), newSource()
	old := src.add("a1", schema.RunWaiting, schema.RunWaitingData{TokenID: "old"})
	old.TS = time.Now().Add(-time.Hour)
	src.logs["a1"][0] = old
	s := newSink("s")
	following := make(chan struct{}, 1)
	_, stop := run(t, fsys, src, Options{Following: func() { following <- struct{}{} }}, s)
	defer stop()
	<-following
	src.wait("a1", "new")
	if n := s.next(t); n.TokenID != "new" {
		t.Fatalf("first notification: %+v, want the new wait only", n)
	}
}

func TestRecordSkipsATornLine(t *testing.T) {
	fsys := newFS(t)
	f, _ := fsys.OpenFile("/h/notify.jsonl", os.O_WRONLY|os.O_CREATE, 0o600)
	_, _ = f.Write([]byte(`{"mark":{"a1":3},"since":"2000-01-01T00:00:00Z","ts":"x"}` + "\n" + `{"ack":"a1:5","sink":"s","ts":"x"}` + "\n" + `{"ack":"a1:6","si`))
	f.Close()
	r := record{fsys: fsys, path: "/h/notify.jsonl"}
	st, err := r.load()
	if err != nil || st.mark["a1"] != 3 || !st.acks["a1:5"]["s"] || len(st.acks) != 1 {
		t.Fatalf("load: %+v, %v", st, err)
	}
}
