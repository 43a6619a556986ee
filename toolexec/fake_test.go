package toolexec

import (
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/tools"
	"github.com/warren-dev/warren/tree"
)

// fakeEnv is an Env without a Core: a real tree (names and routing), a map
// of agents with inboxes, and a record of every effect asked for.
type fakeEnv struct {
	*tree.Tree
	mu      sync.Mutex
	now     time.Time
	ids     int
	limits  Limits
	agents  map[string]*fakeAgent
	effects []string // "<effect> <args>", in call order
	// enqueued are the messages Enqueue made durable, by recipient.
	enqueued map[string][]inbox.Message
	// inboxCap refuses an enqueue that would take a recipient past it (0:
	// no limit).
	inboxCap int
	// fail makes the named effect return this error.
	fail map[string]error
	// badProviders are unknown provider names.
	badProviders map[string]bool
}

type fakeAgent struct {
	Agent
	pending   []inbox.Message
	shown     []string
	reminders map[string]bool
	subs      map[string]bool
	pending2  map[string]ChildSpec // deferred spawns by name
}

func newFakeEnv() *fakeEnv {
	return &fakeEnv{Tree: tree.New(), now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		limits: Limits{MessageBytes: 1000, TakeCount: 100, TakeBytes: 1 << 20, RecentCount: 20, RecentBytes: 1 << 20},
		agents: map[string]*fakeAgent{}, enqueued: map[string][]inbox.Message{},
		fail: map[string]error{}, badProviders: map[string]bool{}}
}

// idOf is the id of the test agent named name.
func idOf(name string) string {
	h := md5.Sum([]byte(name))
	return hex.EncodeToString(h[:])
}

// add adds an idle agent named name under parent (by id, "" for a root);
// its id is idOf(name).
func (f *fakeEnv) add(name, parent string) string {
	id := idOf(name)
	if err := f.Tree.Add(id, name, parent); err != nil {
		panic(err)
	}
	f.agents[id] = &fakeAgent{Agent: Agent{ID: id, Name: name, ParentID: parent, State: tools.StateIdle},
		reminders: map[string]bool{}, subs: map[string]bool{}, pending2: map[string]ChildSpec{}}
	return id
}

func (f *fakeEnv) effect(format string, args ...any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := fmt.Sprintf(format, args...)
	f.effects = append(f.effects, e)
	name, _, _ := cutSpace(e)
	return f.fail[name]
}

func cutSpace(s string) (string, string, bool) {
	for i := range len(s) {
		if s[i] == ' ' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

func (f *fakeEnv) Now() time.Time { return f.now }

func (f *fakeEnv) NewID() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ids++
	return fmt.Sprintf("%032x", f.ids)
}

func (f *fakeEnv) Limits() Limits { return f.limits }

func (f *fakeEnv) Agent(id string) (Agent, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.agents[id]
	if !ok {
		return Agent{}, false
	}
	out := a.Agent
	out.Pending = len(a.pending)
	return out, true
}

func (f *fakeEnv) DisplayName(id string) string {
	if id == tree.User || id == tree.System {
		return id
	}
	if a, ok := f.agents[id]; ok {
		return a.Name
	}
	return id
}

func (f *fakeEnv) Inbox(id string) ([]inbox.Message, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.agents[id]
	return slices.Clone(a.pending), a.shown
}

func (f *fakeEnv) PendingFirst(id string, n int, _ int64) []inbox.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.agents[id].pending
	return slices.Clone(p[:min(n, len(p))])
}

func (f *fakeEnv) FillPayloads(_ string, msgs []inbox.Message) ([]inbox.Message, error) {
	return msgs, f.fail["fill"]
}

func (f *fakeEnv) CheckEnqueue(m inbox.Message, n int, _ int64) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if m.Recipient == tree.User {
		return false, nil
	}
	r, ok := f.agents[m.Recipient]
	if !ok || r.State == tools.StateTerminated {
		return false, fmt.Errorf("recipient %s: %w", m.Recipient, ErrNoAgent)
	}
	for _, p := range r.pending {
		if p.ID == m.ID {
			return true, nil
		}
	}
	if f.inboxCap > 0 && len(r.pending)+n+1 > f.inboxCap {
		return false, fmt.Errorf("the inbox of %s is full: %w", r.Name, ErrInboxFull)
	}
	return false, nil
}

func (f *fakeEnv) Enqueue(m inbox.Message) error {
	if err := f.effect("enqueue %s %s", m.Recipient, m.Payload); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.enqueued[m.Recipient] = append(f.enqueued[m.Recipient], m)
	if r, ok := f.agents[m.Recipient]; ok {
		r.pending = append(r.pending, m)
	}
	return nil
}

func (f *fakeEnv) MarkDelivered(id string, msgIDs []string) error {
	if err := f.effect("delivered %s %v", id, msgIDs); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.agents[id]
	a.pending = slices.DeleteFunc(a.pending, func(m inbox.Message) bool { return slices.Contains(msgIDs, m.ID) })
	return nil
}

func (f *fakeEnv) CheckProvider(name string) error {
	if f.badProviders[name] {
		return fmt.Errorf("unknown provider %q", name)
	}
	return nil
}

func (f *fakeEnv) ChildSpec(parent, id string, v tools.SpawnAgent) ChildSpec {
	return ChildSpec{ID: id, Name: v.Name, ParentID: parent, Instructions: v.Instructions, Provider: v.Provider,
		Model: v.Model, Metadata: v.Metadata}
}

func (f *fakeEnv) CheckChild(spec *ChildSpec) error {
	if len(spec.Instructions) > f.limits.MessageBytes {
		return errors.New("instructions over the limit")
	}
	if spec.Model == "" {
		spec.Model = "default-model"
	}
	return nil
}

func (f *fakeEnv) CreateChild(spec ChildSpec) error {
	if err := f.effect("create %s %s %s", spec.ID, spec.Name, spec.Model); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.Tree.Add(spec.ID, spec.Name, spec.ParentID); err != nil {
		return err
	}
	f.agents[spec.ID] = &fakeAgent{Agent: Agent{ID: spec.ID, Name: spec.Name, ParentID: spec.ParentID, State: tools.StateIdle}}
	return nil
}

func (f *fakeEnv) DeferSpawn(parent string, spec ChildSpec) bool {
	_ = f.effect("defer %s %s", spec.ID, spec.Name)
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.agents[parent]
	if s, ok := p.pending2[spec.Name]; ok {
		return s.ID == spec.ID
	}
	p.pending2[spec.Name] = spec
	return true
}

func (f *fakeEnv) MarkCompleting(id string) { _ = f.effect("completing %s", id) }

func (f *fakeEnv) Poke(id string) { _ = f.effect("poke %s", id) }

func (f *fakeEnv) CheckMetadata(md map[string]string) error {
	n := 0
	for k, v := range md {
		n += len(k) + len(v)
	}
	if n > f.limits.MessageBytes {
		return errors.New("metadata over the limit")
	}
	return nil
}

func (f *fakeEnv) SetMetadata(id, key string, value *string) error {
	v := "<deleted>"
	if value != nil {
		v = *value
	}
	return f.effect("metadata %s %s=%s", id, key, v)
}

func (f *fakeEnv) SetGate(id, name string, gated bool) error {
	return f.effect("gate %s %s %v", id, name, gated)
}

func (f *fakeEnv) PermitTurn(id, name string) error { return f.effect("permit %s %s", id, name) }

func (f *fakeEnv) ScheduleReminder(id string, r Reminder) error {
	if err := f.effect("remind %s %s %q %s %s", id, r.ID, r.Reason, r.Due.Format(time.RFC3339), r.Every); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.agents[id].reminders[r.ID] = true
	return nil
}

func (f *fakeEnv) CancelReminder(id, reminderID string) (bool, error) {
	f.mu.Lock()
	known := f.agents[id].reminders[reminderID]
	delete(f.agents[id].reminders, reminderID)
	f.mu.Unlock()
	if !known {
		return false, nil
	}
	return true, f.effect("cancel %s %s", id, reminderID)
}

func (f *fakeEnv) Subscribe(subscriber string, s Subscription) (bool, error) {
	f.mu.Lock()
	t, ok := f.agents[s.Target]
	alive := ok && t.State != tools.StateTerminated
	if alive {
		f.agents[subscriber].subs[s.ID] = true
	}
	f.mu.Unlock()
	if !alive {
		return false, nil
	}
	return true, f.effect("subscribe %s %s %s %s->%s %v", subscriber, s.ID, s.Target, s.From, s.To, s.Once)
}

func (f *fakeEnv) Unsubscribe(subscriber, id string) (bool, error) {
	f.mu.Lock()
	known := f.agents[subscriber].subs[id]
	delete(f.agents[subscriber].subs, id)
	f.mu.Unlock()
	if !known {
		return false, nil
	}
	return true, f.effect("unsubscribe %s %s", subscriber, id)
}

func (f *fakeEnv) AwaitInput(id string, v tools.AwaitInput, pos Pos) error {
	if err := f.effect("await %s %s %s %s %d", id, v.Kind, v.Timeout, pos.RunID, pos.Turn); err != nil {
		return err
	}
	return provider.ErrRunSuspended
}

// memLog is a Log in memory.
type memLog struct {
	mu      sync.Mutex
	entries []eventlog.Record
	err     error
}

func (l *memLog) Append(event string, data any) (eventlog.Entry, error) {
	_, err := l.AppendBatch([]eventlog.Record{{Event: event, Data: data}})
	return eventlog.Entry{}, err
}

func (l *memLog) AppendBatch(recs []eventlog.Record) ([]eventlog.Entry, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return nil, l.err
	}
	l.entries = append(l.entries, recs...)
	return make([]eventlog.Entry, len(recs)), nil
}

func (l *memLog) records() []eventlog.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.entries)
}

// newAttempt is a ready Attempt.
func newAttempt(env Env, self Caller, runID string, turn int, recorded []Recorded, resume *string) *Attempt {
	t := &Attempt{}
	t.Init(env, self, runID, turn, recorded, resume)
	return t
}
