package turnrun

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/engine/internal/domainerr"
	"github.com/warren-dev/warren/engine/internal/retry"
	"github.com/warren-dev/warren/engine/internal/views"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/history"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/session"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// record is one entry appended.
type record struct {
	event string
	data  any
}

// fakeAgent is an agent that records each step it is asked to take, with
// a scripted provider session (sends) and tools.
type fakeAgent struct {
	mu    sync.Mutex
	steps []string
	recs  []record
	saved []session.Session // session.json after each save
	snap  session.Session
	owed  []record

	settings    Settings
	released    error
	providerErr error
	flushErr    error
	// appendErr fails the appends of the events it names.
	appendErr  map[string]error
	acquireErr error
	policy     retry.Policy
	inject     *history.History
	// sends are the provider's answers, one per attempt (the last one
	// repeats).
	sends    []func(ctx context.Context, prompt string, io provider.TurnIO) (string, error)
	closeErr error
	drainErr error
	wait     *views.WaitInfo
	token    string
	liveWait *session.Wait
	deferred []func()
	complete bool
	termErr  error
	cancel   context.CancelFunc
	nsend    int
	watched  bool // Notices owes a notice of every transition
}

func newFake() *fakeAgent {
	return &fakeAgent{
		settings: Settings{Provider: "inproc", Model: "m1", TurnNo: 4},
		policy: retry.Policy{MaxRetries: 2, Base: 10 * time.Millisecond, Jitter: func() float64 { return 0.5 },
			Sleep: func(ctx context.Context, d time.Duration) error { return nil }},
		appendErr: map[string]error{},
	}
}

func (f *fakeAgent) step(format string, args ...any) {
	f.mu.Lock()
	f.steps = append(f.steps, fmt.Sprintf(format, args...))
	f.mu.Unlock()
}

func (f *fakeAgent) ID() string { return "ag-1" }

func (f *fakeAgent) Append(event string, data any) (eventlog.Entry, error) {
	f.step("append %s", event)
	if err := f.appendErr[event]; err != nil {
		return eventlog.Entry{}, err
	}
	f.recs = append(f.recs, record{event, data})
	return eventlog.Entry{}, nil
}

func (f *fakeAgent) SaveSession(fn func(*session.Session)) {
	fn(&f.snap)
	f.step("save %s", f.snap.State)
	f.saved = append(f.saved, f.snap)
}

// Notices owes a notice of every transition when f.watched (a record
// naming the transition, no step of its own: the write shows it).
func (f *fakeAgent) Notices(from, to, key string) []eventlog.Record {
	if !f.watched {
		return nil
	}
	return []eventlog.Record{{Event: "notices.owed", Data: from + "->" + to + " " + key}}
}

func (f *fakeAgent) Notify() { f.step("notify") }

func (f *fakeAgent) AppendBatch(recs []eventlog.Record) ([]eventlog.Entry, error) {
	names := make([]string, len(recs))
	for i, r := range recs {
		names[i] = r.Event
		if err := f.appendErr[r.Event]; err != nil {
			return nil, err
		}
	}
	f.step("append %s", strings.Join(names, "+"))
	for _, r := range recs {
		f.recs = append(f.recs, record{r.Event, r.Data})
	}
	return make([]eventlog.Entry, len(recs)), nil
}

func (f *fakeAgent) Begin(req Request, cancel context.CancelFunc) (Turn, error) {
	f.step("begin")
	f.cancel = cancel
	n := 0
	t := Choose(req, f.settings, func(p string) string { return p + "-default" }, func() string { n++; return fmt.Sprintf("run-%d", n) })
	return t, f.released
}

func (f *fakeAgent) Ended()                     { f.step("ended") }
func (f *fakeAgent) Provider(name string) error { f.step("provider %s", name); return f.providerErr }
func (f *fakeAgent) FlushOwed() error           { f.step("flush-owed"); return f.flushErr }

func (f *fakeAgent) Acquire(ctx context.Context, provName, model string) (Session, error) {
	f.step("acquire %s/%s", provName, model)
	if f.acquireErr != nil {
		return nil, f.acquireErr
	}
	return fakeSession{f}, nil
}

func (f *fakeAgent) Policy() retry.Policy     { f.step("policy"); return f.policy }
func (f *fakeAgent) Delta(runID, text string) { f.step("delta %s %q", runID, text) }

func (f *fakeAgent) Tools(runID string, turn int) Tools {
	f.step("tools %s/%d", runID, turn)
	return fakeTools{f}
}

func (f *fakeAgent) Owe(runID, event string, data any, cause error) {
	f.step("owe %s %s", runID, event)
	f.owed = append(f.owed, record{event, data})
}

func (f *fakeAgent) Suspended(runID string) (*views.WaitInfo, string) {
	f.step("suspended %s", runID)
	return f.wait, f.token
}

func (f *fakeAgent) LiveWait() *session.Wait { f.step("live-wait"); return f.liveWait }

func (f *fakeAgent) Rest(held bool) ([]func(), bool) {
	f.step("rest held=%v", held)
	return f.deferred, f.complete
}

func (f *fakeAgent) Checkpoint() { f.step("checkpoint") }
func (f *fakeAgent) Settled()    { f.step("settled") }
func (f *fakeAgent) Changed()    { f.step("changed") }
func (f *fakeAgent) Terminate() error {
	f.step("terminate")
	return f.termErr
}
func (f *fakeAgent) NotifyFailure() { f.step("notify-failure") }
func (f *fakeAgent) Wake()          { f.step("wake") }

type fakeSession struct{ f *fakeAgent }

func (s fakeSession) Inject() *history.History { return s.f.inject }
func (s fakeSession) Injected()                { s.f.step("injected"); s.f.inject = nil }
func (s fakeSession) End(discard bool)         { s.f.step("end discard=%v", discard) }

func (s fakeSession) Send(ctx context.Context, prompt string, io provider.TurnIO) (string, error) {
	f := s.f
	f.step("send %q", prompt)
	if io.Tools == nil {
		return "", errors.New("no tools given to the provider")
	}
	i := min(f.nsend, len(f.sends)-1)
	f.nsend++
	return f.sends[i](ctx, prompt, io)
}

type fakeTools struct{ f *fakeAgent }

func (x fakeTools) Caller() provider.ToolCaller { return x }
func (x fakeTools) CallTool(context.Context, string, map[string]any) (map[string]any, error) {
	return nil, nil
}
func (x fakeTools) Open(ctx context.Context, suspend context.CancelCauseFunc) { x.f.step("open") }
func (x fakeTools) Close() error                                              { x.f.step("close"); return x.f.closeErr }
func (x fakeTools) Drain() error                                              { x.f.step("drain"); return x.f.drainErr }

// answer is a send that answers text.
func answer(text string) func(context.Context, string, provider.TurnIO) (string, error) {
	return func(context.Context, string, provider.TurnIO) (string, error) { return text, nil }
}

// fail is a send that fails with err.
func fail(err error) func(context.Context, string, provider.TurnIO) (string, error) {
	return func(context.Context, string, provider.TurnIO) (string, error) { return "", err }
}

// clock counts its reads.
type clock struct {
	mu    sync.Mutex
	reads int
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads++
	return t0
}

func newRunner(c *clock) Runner {
	return Runner{BootID: "boot-1", Now: c.Now, Log: hclog.NewNullLogger()}
}

// wantSteps fails unless the steps are want.
func wantSteps(t *testing.T, f *fakeAgent, want ...string) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if fmt.Sprintf("%q", f.steps) != fmt.Sprintf("%q", want) {
		t.Fatalf("steps:\n got %q\nwant %q", f.steps, want)
	}
}

// wantRefusal fails unless err is a domain error of condition k reading
// text.
func wantRefusal(t *testing.T, err error, k error, text string) {
	t.Helper()
	var d *domainerr.Error
	if !errors.As(err, &d) || d.Kind != k || err.Error() != text {
		t.Fatalf("error %v (%T); want a domain error %q reading %q", err, err, k, text)
	}
}
