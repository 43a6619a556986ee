package engine

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/agentspec"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/multiplexer"
	fold "github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/session"
	"github.com/warren-dev/warren/store"
)

// fakeProv is a provider whose sessions record what happens to them.
type fakeProv struct {
	mu      sync.Mutex
	created []provider.Spec
	stopped []string // models of stopped sessions
	blob    []byte
}

func (p *fakeProv) Name() string                        { return "fake" }
func (p *fakeProv) Capabilities() provider.Capabilities { return provider.Capabilities{} }
func (p *fakeProv) Create(_ context.Context, spec provider.Spec) (provider.Session, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.created = append(p.created, spec)
	return &fakeSess{p: p, model: spec.Model}, nil
}
func (p *fakeProv) Restore(context.Context, provider.Spec, []byte, string) (provider.Session, error) {
	return nil, provider.ErrCannotRestore
}

type fakeSess struct {
	p     *fakeProv
	model string
}

func (s *fakeSess) Handle() string { return "h-" + s.model }
func (s *fakeSess) Send(context.Context, string, provider.TurnIO) (string, error) {
	return "reply", nil
}
func (s *fakeSess) Suspend(context.Context) ([]byte, error) { return s.p.blob, nil }
func (s *fakeSess) Stop() error {
	s.p.mu.Lock()
	s.p.stopped = append(s.p.stopped, s.model)
	s.p.mu.Unlock()
	return nil
}

// recLog is the agent's log: it keeps the events appended.
type recLog struct {
	mu     sync.Mutex
	events []string
}

func (l *recLog) Append(event string, _ any) (eventlog.Entry, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, event)
	return eventlog.Entry{Seq: uint64(len(l.events)), Event: event}, nil
}
func (l *recLog) AppendBatch(recs []eventlog.Record) ([]eventlog.Entry, error) {
	for _, r := range recs {
		_, _ = l.Append(r.Event, r.Data)
	}
	return make([]eventlog.Entry, len(recs)), nil
}
func (l *recLog) LastSeq() uint64                                   { return 0 }
func (l *recLog) Degraded() error                                   { return nil }
func (l *recLog) VerifyPrefix() error                               { return nil }
func (l *recLog) ReadAll(context.Context) ([]eventlog.Entry, error) { return nil, nil }
func (l *recLog) Abandon()                                          {}
func (l *recLog) Close() error                                      { return nil }

type emptyReader struct{}

func (emptyReader) Next() (eventlog.Entry, error) { return eventlog.Entry{}, io.EOF }
func (emptyReader) Close() error                  { return nil }

type world struct {
	s     *liveSessions
	prov  *fakeProv
	a     *agent
	log   *recLog
	saved chan *session.Session
}

func newWorld(t *testing.T, slots int) *world {
	t.Helper()
	w := &world{prov: &fakeProv{blob: []byte("blob")}, log: &recLog{}, saved: make(chan *session.Session, 10)}
	w.a = newAgent("a1", w.log, fold.New())
	snaps := &snapshotWriter{Save: func(s *session.Session) error { w.saved <- s; return nil }, Delay: func() {},
		Now: func() time.Time { return time.Unix(5, 0) }, Logger: hclog.NewNullLogger()}
	w.s = newLiveSessions(multiplexer.Config{Pools: map[string]int{"default": slots}, DefaultPool: "default"}, liveOptions{
		Lookup: func(id string) (*agent, bool) { return w.a, id == "a1" },
		Provider: func(name string) (provider.Provider, error) {
			if name != "fake" {
				return nil, errors.New("unknown provider")
			}
			return w.prov, nil
		},
		Spec: func(provName, id, model, instructions, cwd string) provider.Spec {
			return provider.Spec{AgentID: id, Model: model, Instructions: instructions, Cwd: cwd}
		},
		Read:  func(context.Context, string, uint64, int64) (store.Reader, error) { return emptyReader{}, nil },
		Snaps: snaps, Now: func() time.Time { return time.Unix(5, 0) }, Logger: hclog.NewNullLogger(),
	})
	t.Cleanup(snaps.Wait)
	return w
}

// A turn's Acquire creates the session when none is live, reuses the live
// one for the same provider and model, and replaces (stops) it for
// another model.
func TestAcquireReusesOrReplaces(t *testing.T) {
	w := newWorld(t, 2)
	ctx := context.Background()
	ts, err := w.s.Acquire(ctx, w.a, "fake", "m1")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := ts.Send(ctx, "hi", provider.TurnIO{}); err != nil || out != "reply" {
		t.Fatalf("Send = %q, %v", out, err)
	}
	ts.End(false)
	ts, err = w.s.Acquire(ctx, w.a, "fake", "m1")
	if err != nil {
		t.Fatal(err)
	}
	ts.End(false)
	if n := len(w.prov.created); n != 1 {
		t.Fatalf("%d sessions created for the same provider and model, want 1", n)
	}
	ts, err = w.s.Acquire(ctx, w.a, "fake", "m2")
	if err != nil {
		t.Fatal(err)
	}
	ts.End(true) // discarded: stopped
	if len(w.prov.created) != 2 || len(w.prov.stopped) != 2 || w.prov.stopped[0] != "m1" || w.prov.stopped[1] != "m2" {
		t.Fatalf("created %d, stopped %v; want m1 replaced by m2, then m2 discarded", len(w.prov.created), w.prov.stopped)
	}
	if _, err := w.s.Acquire(ctx, w.a, "nobody", "m"); err == nil {
		t.Fatal("an unknown provider was acquired")
	}
}

// Eviction suspends the live session, saves its blob in session.json,
// logs suspend.result and stops the session.
func TestEvictSavesBlobAndLogs(t *testing.T) {
	w := newWorld(t, 1)
	ctx := context.Background()
	ts, err := w.s.Acquire(ctx, w.a, "fake", "m1")
	if err != nil {
		t.Fatal(err)
	}
	ts.End(false)
	if err := w.s.Evict(ctx, "a1"); err != nil {
		t.Fatal(err)
	}
	// Evict flushed session.json before it returned, so its save is the
	// last one made (the acquire's own, written behind, may come first).
	var last *session.Session
	for drained := false; !drained; {
		select {
		case s := <-w.saved:
			last = s
		default:
			drained = true
		}
	}
	if last == nil || string(last.ProviderState) != "blob" || last.Provider != "fake" || last.Model != "m1" {
		t.Fatalf("last saved %+v, want the blob of fake m1", last)
	}
	if n := len(w.log.events); n == 0 || w.log.events[n-1] != schema.SuspendResult {
		t.Fatalf("logged %v, want suspend.result last", w.log.events)
	}
	if len(w.prov.stopped) != 1 {
		t.Fatalf("stopped %v", w.prov.stopped)
	}
	if err := w.s.Evict(ctx, "a1"); err == nil {
		t.Fatal("evicted a session that is not live")
	}
}

// A new agent's session takes its history mode from the spec's metadata
// (the agent is not listed yet); abandoned, it is stopped. With every
// slot held, a creation is refused as ErrNoSlot once ctx ends.
func TestCreateAndNoSlot(t *testing.T) {
	w := newWorld(t, 1)
	ctx := context.Background()
	spec := CreateSpec{Name: "n", Provider: "fake", Model: "m1", Metadata: map[string]string{agentspec.HistoryModeKey: "full"}}
	ns, err := w.s.Create(ctx, w.prov, "a2", spec)
	if err != nil {
		t.Fatal(err)
	}
	if ns.Handle() != "h-m1" || w.prov.created[0].HistoryMode != "full" {
		t.Fatalf("handle %q, history mode %q", ns.Handle(), w.prov.created[0].HistoryMode)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := w.s.Create(short, w.prov, "a3", spec); !errors.Is(err, ErrNoSlot) {
		t.Fatalf("create with no free slot: %v, want NoSlot", err)
	}
	ns.Abandon()
	if len(w.prov.stopped) != 1 {
		t.Fatalf("stopped %v after Abandon", w.prov.stopped)
	}
}
