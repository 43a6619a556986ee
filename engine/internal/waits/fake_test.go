package waits

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warren-dev/warren/engine/internal/domainerr"
	"github.com/warren-dev/warren/eventlog"
	fold "github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/session"
	"github.com/warren-dev/warren/token"
)

// result is the turn result of the tests.
type result struct{ RunID, Status, Response string }

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// clock is a settable clock that counts its reads.
type clock struct {
	mu    sync.Mutex
	now   time.Time
	reads int
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads++
	return c.now
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

func newWaits(c *clock) Waits[result] {
	return Waits[result]{Tokens: token.NewService(), Now: c.Now,
		Result: func(runID string, status session.Status, response string) result {
			return result{runID, string(status), response}
		}}
}

// fakeAgent is an agent record that logs each step it is asked to take.
type fakeAgent struct {
	id, name string

	watched bool // Notices owes a notice of every transition
	mu      sync.Mutex
	steps   []string
	recs    []eventlog.Record // appended
	state   State
	last    *fold.Resume
	busy    bool

	claimErr  error
	appendErr error // every append fails with it
	owed      bool
	flushErr  error
	owedErr   error
	// turns yields the result of each turn Start runs (nil: the turn
	// returns result{run, "idle", "done"} at once).
	turns   chan result
	changed chan struct{} // closed at the next change
	// onState, if set, is called with the count of State reads so far
	// after each one.
	onState func(n int)
	reads   int
	// started, if set, is sent the run id of each turn Start starts.
	started chan string

	resumes Resumes[result]
}

func newAgent(run fold.Run) *fakeAgent {
	return &fakeAgent{id: "ag-1", name: "root/worker", state: State{Run: run}}
}

func (f *fakeAgent) step(format string, args ...any) {
	f.mu.Lock()
	f.steps = append(f.steps, fmt.Sprintf(format, args...))
	f.mu.Unlock()
}

// took returns the steps so far, joined by "; ".
func (f *fakeAgent) took() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.steps, "; ")
}

func (f *fakeAgent) ID() string   { return f.id }
func (f *fakeAgent) Name() string { return f.name }

func (f *fakeAgent) State() State {
	f.mu.Lock()
	s := f.state
	f.reads++
	n, hook := f.reads, f.onState
	f.mu.Unlock()
	if hook != nil {
		hook(n)
	}
	return s
}

func (f *fakeAgent) LastResume() (fold.Resume, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.last == nil {
		return fold.Resume{}, false
	}
	return *f.last, true
}

func (f *fakeAgent) Claim() error {
	f.step("claim")
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.claimErr != nil {
		return f.claimErr
	}
	if f.busy || f.state.Busy {
		return errors.New("mid-turn")
	}
	f.busy = true
	return nil
}

func (f *fakeAgent) Unclaim() {
	f.step("unclaim")
	f.mu.Lock()
	f.busy = false
	f.mu.Unlock()
}

func (f *fakeAgent) Release() {
	f.step("release")
	f.mu.Lock()
	f.busy = false
	f.mu.Unlock()
}

func (f *fakeAgent) Append(event string, data any) (eventlog.Entry, error) {
	_, err := f.AppendBatch([]eventlog.Record{{Event: event, Data: data}})
	return eventlog.Entry{}, err
}

func (f *fakeAgent) AppendBatch(recs []eventlog.Record) ([]eventlog.Entry, error) {
	events := make([]string, len(recs))
	for i, r := range recs {
		events[i] = r.Event
	}
	if f.appendErr != nil {
		f.step("append failed: %s", strings.Join(events, "+"))
		return nil, f.appendErr
	}
	f.step("append %s", strings.Join(events, "+"))
	f.mu.Lock()
	f.recs = append(f.recs, recs...)
	f.mu.Unlock()
	return make([]eventlog.Entry, len(recs)), nil
}

func (f *fakeAgent) Start(run fold.Run, from string) <-chan result {
	f.step("start %s from %q", run.RunID, from)
	if f.started != nil {
		f.started <- run.RunID
	}
	out := make(chan result, 1)
	if f.turns == nil {
		out <- result{run.RunID, "idle", "done"}
		return out
	}
	go func() { out <- <-f.turns }()
	return out
}

// Changed returns the channel of the next change (closed by change).
func (f *fakeAgent) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.changed == nil {
		f.changed = make(chan struct{})
	}
	return f.changed
}

// change applies edit to the agent's state and signals the change.
func (f *fakeAgent) change(edit func(s *State)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	edit(&f.state)
	if f.changed != nil {
		close(f.changed)
		f.changed = nil
	}
}
func (f *fakeAgent) Resumes() *Resumes[result] { return &f.resumes }
func (f *fakeAgent) Owed() bool                { return f.owed }

func (f *fakeAgent) FlushOwed() error {
	f.step("flush owed")
	return f.flushErr
}

func (f *fakeAgent) OwedErr() error        { return f.owedErr }
func (f *fakeAgent) Cancelled(waited bool) { f.step("cancelled waited=%v", waited) }

// Notices owes a notice of every transition when f.watched; the write
// that carries it shows it (notices.owed from->to key).
func (f *fakeAgent) Notices(from, to, key string) []eventlog.Record {
	if !f.watched {
		return nil
	}
	return []eventlog.Record{{Event: "notices.owed(" + from + "->" + to + " " + key + ")"}}
}

func (f *fakeAgent) Expired() { f.step("expired") }
func (f *fakeAgent) wantSteps(t *testing.T, want string) {
	t.Helper()
	if got := f.took(); got != want {
		t.Fatalf("steps:\n got  %s\n want %s", got, want)
	}
}

// refusal returns the condition of err when it is a domain error (nil
// when it is not one).
func refusal(err error) error {
	if d, ok := err.(*domainerr.Error); ok {
		return d.Kind
	}
	return nil
}
