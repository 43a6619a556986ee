package lifecycle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/engine/internal/domainerr"
	"github.com/warren-dev/warren/engine/internal/gone"
	"github.com/warren-dev/warren/engine/internal/subs"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/session"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// kindOf is the condition of a domain error (nil for another error).
func kindOf(err error) error {
	var d *domainerr.Error
	if errors.As(err, &d) {
		return d.Kind
	}
	return nil
}

// fake is an engine that records every step it is asked to take, in one
// list for the host and its agents.
type fake struct {
	mu     sync.Mutex
	steps  []string
	agents map[string]*fakeAgent
	kids   map[string][]string
	parent map[string]string
	reads  int // clock reads
	logBuf bytes.Buffer

	closed      bool
	reserveErr  error
	sessionErr  error
	openErr     error
	lastSeq     uint64
	appendErr   error
	tellErr     error
	entries     map[uint64]eventlog.Entry // ReadSeq
	recs        []eventlog.Record         // AppendBatch of the new log
	snapshot    *session.Session
	badProvider bool
	noDefault   bool // life() has no DefaultProvider
}

func newFake() *fake {
	return &fake{agents: map[string]*fakeAgent{}, kids: map[string][]string{}, parent: map[string]string{}}
}

func (f *fake) step(format string, args ...any) {
	f.mu.Lock()
	f.steps = append(f.steps, fmt.Sprintf(format, args...))
	f.mu.Unlock()
}

// took returns the steps so far and forgets them.
func (f *fake) took() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.steps
	f.steps = nil
	return s
}

func (f *fake) life() Lifecycle {
	dp := "dp"
	if f.noDefault {
		dp = ""
	}
	return Lifecycle{Host: f, Tree: fakeTree{f}, Log: hclog.New(&hclog.LoggerOptions{Output: &f.logBuf}),
		Now: func() time.Time {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.reads++
			return t0
		},
		Ctx: context.Background(), DefaultProvider: dp, DefaultModel: "dm"}
}

// add puts a live agent id named name under parent ("" = a root).
func (f *fake) add(id, name, parent string) *fakeAgent {
	a := &fakeAgent{f: f, id: id, name: name, inherit: Inherited{Provider: "p-" + id, Model: "m-" + id, Cwd: "/w/" + id}}
	f.agents[id] = a
	if parent != "" {
		f.parent[id] = parent
		f.kids[parent] = append(f.kids[parent], id)
	}
	return a
}

func (f *fake) removeTree(id string) {
	p := f.parent[id]
	delete(f.parent, id)
	ks := f.kids[p]
	for i, k := range ks {
		if k == id {
			f.kids[p] = append(ks[:i:i], ks[i+1:]...)
			break
		}
	}
}

type fakeTree struct{ f *fake }

func (t fakeTree) Children(id string) []string { return append([]string(nil), t.f.kids[id]...) }
func (t fakeTree) Parent(id string) (string, bool) {
	p, ok := t.f.parent[id]
	return p, ok
}
func (t fakeTree) Path(id string) string {
	if p, ok := t.f.parent[id]; ok {
		return t.Path(p) + "/" + t.f.agents[id].name
	}
	return t.f.agents[id].name
}

// Host.

func (f *fake) Lookup(id string) (Agent, error) {
	if a, ok := f.agents[id]; ok {
		return a, nil
	}
	return nil, fmt.Errorf("agent %q not found", id)
}

func (f *fake) Provider(name string) (provider.Provider, error) {
	f.step("provider %s", name)
	if f.badProvider {
		return nil, domainerr.New(domainerr.Invalid, "unknown provider %q", name)
	}
	return nil, nil
}

func (f *fake) CheckModel(prov string, model *string) error {
	f.step("model %s %s", prov, *model)
	return nil
}

func (f *fake) Served(_ provider.Provider, prov, model string) error {
	f.step("served %s %s", prov, model)
	return nil
}

func (f *fake) CheckText(instr string, md map[string]string) error {
	f.step("text")
	if strings.Contains(instr, "too long") {
		return errors.New("instructions are too long")
	}
	return nil
}

func (f *fake) NewID() string { return "fresh" }

func (f *fake) Reserve(id, name, parentID string) (bool, error) {
	f.step("reserve %s %s %s", id, name, parentID)
	return f.closed, f.reserveErr
}

func (f *fake) Unreserve(id string) { f.step("unreserve %s", id) }

func (f *fake) OpenSession(_ context.Context, _ provider.Provider, id string, spec Spec) (Session, error) {
	f.step("session %s %s %s", id, spec.Provider, spec.Model)
	if f.sessionErr != nil {
		return nil, f.sessionErr
	}
	return fakeSession{f}, nil
}

func (f *fake) OpenLog(id string) (NewLog, error) {
	f.step("open log %s", id)
	if f.openErr != nil {
		return nil, f.openErr
	}
	return &fakeLog{f: f, id: id}, nil
}

func (f *fake) DropLease(id string)       { f.step("drop lease %s", id) }
func (f *fake) RemoveOrphanDir(id string) { f.step("remove dir %s", id) }
func (f *fake) Changed()                  { f.step("changed") }

func (f *fake) Notify(name string, watchers []subs.Sub, from, to, key string) {
	f.step("notify %s %d %s->%s %s", name, len(watchers), from, to, key)
}

func (f *fake) Tell(to, text string) error {
	f.step("tell %s %s", to, text)
	return f.tellErr
}

func (f *fake) ReadSeq(_ context.Context, id string, seq uint64, off int64) (eventlog.Entry, error) {
	f.step("read %s %d %d", id, seq, off)
	e, ok := f.entries[seq]
	if !ok {
		return eventlog.Entry{}, errors.New("no such entry")
	}
	return e, nil
}

type fakeSession struct{ f *fake }

func (s fakeSession) Handle() string { return "h1" }
func (s fakeSession) Abandon()       { s.f.step("abandon session") }
func (s fakeSession) Keep()          { s.f.step("keep session") }

type fakeLog struct {
	f  *fake
	id string
	a  *fakeAgent
}

func (l *fakeLog) LastSeq() uint64 { return l.f.lastSeq }
func (l *fakeLog) Bind() Agent {
	l.f.step("bind %s", l.id)
	l.a = &fakeAgent{f: l.f, id: l.id}
	return l.a
}

func (l *fakeLog) AppendBatch(recs []eventlog.Record) error {
	var evs []string
	for _, r := range recs {
		evs = append(evs, r.Event)
	}
	l.f.step("append %s", strings.Join(evs, "+"))
	if l.f.appendErr != nil {
		return l.f.appendErr
	}
	l.f.recs = recs
	return nil
}

func (l *fakeLog) Close() error { l.f.step("close log %s", l.id); return nil }
func (l *fakeLog) Adopt()       { l.f.step("adopt %s", l.id); l.f.agents[l.id] = l.a }

// fakeAgent is one agent of the fake engine.
type fakeAgent struct {
	f        *fake
	id, name string
	look     Look
	inherit  Inherited
	watched  bool              // Notices owes a notice of every transition
	saved    []session.Session // what each Save made of base()

	claimErr, revokeErr, flushErr, appendErr, closeErr error
	queue                                              Spawns
	later                                              []func()
	watchers                                           []subs.Sub
}

func (a *fakeAgent) ID() string         { return a.id }
func (a *fakeAgent) Name() string       { return a.name }
func (a *fakeAgent) Look() Look         { return a.look }
func (a *fakeAgent) Inherit() Inherited { return a.inherit }
func (a *fakeAgent) State() string      { a.f.step("%s state", a.id); return "idle" }
func (a *fakeAgent) StopTimers()        { a.f.step("%s stop timers", a.id) }
func (a *fakeAgent) StopSession()       { a.f.step("%s stop session", a.id) }
func (a *fakeAgent) Detach()            { a.f.step("%s detach", a.id) }
func (a *fakeAgent) Bootstrap()         { a.f.step("%s bootstrap", a.id) }
func (a *fakeAgent) Release()           { a.f.step("%s release", a.id) }
func (a *fakeAgent) SetSnapshot(s *session.Session) {
	a.f.step("%s snapshot", a.id)
	a.f.snapshot = s
}

func (a *fakeAgent) Append(event string, data any) (eventlog.Entry, error) {
	a.f.step("%s append %s", a.id, event)
	if a.appendErr != nil {
		return eventlog.Entry{}, a.appendErr
	}
	return eventlog.Entry{Seq: 7, TS: t0.Add(time.Minute), Event: event}, nil
}

func (a *fakeAgent) AppendBatch(recs []eventlog.Record) ([]eventlog.Entry, error) {
	names := make([]string, len(recs))
	for i, r := range recs {
		names[i] = r.Event
	}
	a.f.step("%s append %s", a.id, strings.Join(names, "+"))
	if a.appendErr != nil {
		return nil, a.appendErr
	}
	es := make([]eventlog.Entry, len(recs))
	for i, r := range recs {
		es[i] = eventlog.Entry{Seq: 7 + uint64(i), TS: t0.Add(time.Minute), Event: r.Event}
	}
	return es, nil
}

// Notices owes a notice of every transition when the agent is watched;
// the write that carries it shows it.
func (a *fakeAgent) Notices(from, to, key string) []eventlog.Record {
	if !a.watched {
		return nil
	}
	return []eventlog.Record{{Event: "notices.owed(" + from + "->" + to + " " + key + ")"}}
}

func (a *fakeAgent) Save(f func(*session.Session)) {
	a.f.step("%s save", a.id)
	s := base()
	f(&s)
	a.saved = append(a.saved, s)
}

func (a *fakeAgent) Claim() error {
	a.f.step("%s claim", a.id)
	return a.claimErr
}

func (a *fakeAgent) Revoke(tok, run, reason string) error {
	a.f.step("%s revoke %s %s %s", a.id, tok, run, reason)
	return a.revokeErr
}

func (a *fakeAgent) FlushOwed() error {
	a.f.step("%s flush owed", a.id)
	return a.flushErr
}

func (a *fakeAgent) GoneInfo(ended time.Time) *gone.Info {
	a.f.step("%s gone info %s", a.id, ended.Format(time.TimeOnly))
	return &gone.Info{TerminatedAt: ended}
}

func (a *fakeAgent) Unlist(name, parentID string, info *gone.Info) []subs.Sub {
	a.f.step("%s unlist %s parent=%s ended=%s", a.id, name, parentID, info.TerminatedAt.Format(time.TimeOnly))
	delete(a.f.agents, a.id)
	a.f.removeTree(a.id)
	return a.watchers
}

func (a *fakeAgent) CloseLog() error {
	a.f.step("%s close log", a.id)
	return a.closeErr
}

func (a *fakeAgent) Defer(spec Spec, later func()) (ok, now bool) {
	ok, queued, now := a.queue.Defer(spec, a.look.Busy)
	a.f.step("%s defer %s ok=%v queued=%v now=%v", a.id, spec.Name, ok, queued, now)
	if queued {
		a.later = append(a.later, later)
	}
	return ok, now
}

func (a *fakeAgent) Spawned(id string) {
	a.f.step("%s spawned %s", a.id, id)
	a.queue.Done(id)
}

func (a *fakeAgent) Completing() bool {
	a.f.step("%s completing", a.id)
	return a.look.Busy
}

// base is the snapshot the fake's Save changes.
func base() session.Session {
	return session.Session{ID: "x", State: session.StateRunning, Handle: "h", ProviderState: []byte("blob"), Run: &session.Run{RunID: "r1"}}
}

// sameSteps fails the test unless got is want.
func sameSteps(t *testing.T, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("steps:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}
