package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/session"
	"github.com/warren-dev/warren/store"
	"github.com/warren-dev/warren/store/local"
)

// The turn tests' providers, stores and readers of the log.

// funcProv is a provider whose sessions answer with send (a provider that
// reports usage, or answers whatever its context says); with create set,
// no session of it can be had.
type funcProv struct {
	create error
	send   func(ctx context.Context, agentID, prompt string, io provider.TurnIO) (string, error)
}

func (p *funcProv) Name() string                        { return "fn" }
func (p *funcProv) Capabilities() provider.Capabilities { return provider.Capabilities{} }
func (p *funcProv) Create(_ context.Context, spec provider.Spec) (provider.Session, error) {
	if p.create != nil {
		return nil, p.create
	}
	return &funcSess{p: p, agentID: spec.AgentID}, nil
}
func (p *funcProv) Restore(context.Context, provider.Spec, []byte, string) (provider.Session, error) {
	return nil, provider.ErrCannotRestore
}

type funcSess struct {
	p       *funcProv
	agentID string
}

func (s *funcSess) Handle() string { return "" }
func (s *funcSess) Send(ctx context.Context, prompt string, io provider.TurnIO) (string, error) {
	return s.p.send(ctx, s.agentID, prompt, io)
}
func (s *funcSess) Suspend(context.Context) ([]byte, error) { return nil, nil }
func (s *funcSess) Stop() error                             { return nil }

// refuseStore is store/local whose logs refuse the appends of the events
// it is told to, with the error given, without poisoning (as a store does
// with a record it will not take).
type refuseStore struct {
	*local.Store
	mu      sync.Mutex
	refused map[string]error
}

func (s *refuseStore) refuse(event string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refused == nil {
		s.refused = map[string]error{}
	}
	s.refused[event] = err
}

func (s *refuseStore) refusal(recs ...eventlog.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range recs {
		if err := s.refused[r.Event]; err != nil {
			return err
		}
	}
	return nil
}

func (s *refuseStore) OpenLog(ctx context.Context, id string, o store.LogOptions) (store.Log, error) {
	lg, err := s.Store.OpenLog(ctx, id, o)
	if err != nil {
		return nil, err
	}
	return &refuseLog{Log: lg, s: s}, nil
}

type refuseLog struct {
	store.Log
	s *refuseStore
}

func (l *refuseLog) Append(event string, data any) (eventlog.Entry, error) {
	if err := l.s.refusal(eventlog.Record{Event: event}); err != nil {
		return eventlog.Entry{}, err
	}
	return l.Log.Append(event, data)
}

func (l *refuseLog) AppendBatch(recs []eventlog.Record) ([]eventlog.Entry, error) {
	if err := l.s.refusal(recs...); err != nil {
		return nil, err
	}
	return l.Log.AppendBatch(recs)
}

// healAtOnce: logs reopen at the next append after a failed write (no
// timer), no wake turns, session.json written at each save.
func healAtOnce(h *harness) {
	h.healBackoff = -1
	h.noWake = true
	h.saveDelay = -1
}

// failLog makes every write to agent id's log (its pending file and the
// log itself) fail with ENOSPC until h.fs.ClearRules: an append fails, and
// so does the reopen that would heal it.
func failLog(h *harness, id string) {
	for _, name := range []string{"/events.pending", "/events.jsonl"} {
		h.fs.Inject(faultfs.Rule{Kind: faultfs.OpAny, Path: id + name, Err: syscall.ENOSPC, Sticky: true})
	}
}

// sessionJSON is agent id's session.json once the writes started so far
// have landed (immediately with saveDelay -1).
func (h *harness) sessionJSON(id string) *session.Session {
	h.t.Helper()
	h.c.snaps.Wait()
	s, err := session.NewStore(h.fs, "/home/agents").Load(id)
	if err != nil {
		h.t.Fatalf("session.json of %s: %v", id, err)
	}
	return s
}

// eventsSince lists the events of id's log after its first n entries.
func (h *harness) eventsSince(id string, n int) []string {
	return h.events(id)[n:]
}

// turnEvents lists the turn.start and turn end events of id's log.
func turnEvents(h *harness, id string) []string {
	var out []string
	for _, ev := range h.events(id) {
		switch ev {
		case schema.TurnStart, schema.TurnComplete, schema.TurnFailed, schema.TurnCancelled:
			out = append(out, ev)
		}
	}
	return out
}

// lastOf and firstOf decode the data of the last (first) entry of event in
// id's log into v.
func lastOf(h *harness, id, event string, v any) { entryOf(h, id, event, v, true) }

func firstOf(h *harness, id, event string, v any) { entryOf(h, id, event, v, false) }

func entryOf(h *harness, id, event string, v any, last bool) {
	h.t.Helper()
	var data json.RawMessage
	for _, e := range h.entries(id) {
		if e.Event == event {
			data = e.Data
			if !last {
				break
			}
		}
	}
	if data == nil {
		h.t.Fatalf("no %s in the log of %s", event, id)
	}
	if err := json.Unmarshal(data, v); err != nil {
		h.t.Fatalf("%s: %v", event, err)
	}
}

// failureNotices counts the notices of a failed turn of agent failed in
// parent's log.
func failureNotices(h *harness, parent, failed string) int {
	n := 0
	for _, e := range h.entries(parent) {
		if e.Event != schema.MessageEnqueued {
			continue
		}
		d := dataOf(h.t, e)
		if md, _ := d["metadata"].(map[string]any); d["kind"] == "error" && md["failed_agent"] == failed {
			n++
		}
	}
	return n
}

// stateNotices counts the subscription notices in subscriber's log that
// contain text.
func stateNotices(h *harness, subscriber, text string) int {
	n := 0
	for _, e := range h.entries(subscriber) {
		if e.Event == schema.MessageEnqueued {
			if p, _ := dataOf(h.t, e)["payload"].(string); strings.HasPrefix(p, "[state]") && strings.Contains(p, text) {
				n++
			}
		}
	}
	return n
}

func heldOf(a *agent) bool { return look(a, func(_ *projection, l liveFlags) bool { return l.Held }) }

// nextTurnReopens runs a turn of id and reports whether it brought a
// provider session back (logged session.restored, after its turn.start):
// the session was not live, the turn before discarded it.
func nextTurnReopens(h *harness, id, prompt string) bool {
	h.t.Helper()
	before := len(h.entries(id))
	if res, err := h.c.Send(context.Background(), id, prompt, "", "", nil); err != nil || res.Err != nil {
		h.t.Fatalf("the next turn: %+v, %v", res, err)
	}
	for _, ev := range h.eventsSince(id, before) {
		if ev == schema.SessionRestored {
			return true
		}
	}
	return false
}

// wantNoTurn fails unless a turn refused before it started left no trace:
// the log as before, no session.json written since the op ops, the agent
// neither busy, nor running a turn, nor held, nor settling.
func wantNoTurn(t *testing.T, h *harness, a *agent, before []string, ops int) {
	t.Helper()
	if got := h.events(a.ID()); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Errorf("the log is %v; want it unchanged, %v", got, before)
	}
	h.c.snaps.Wait()
	if n := sessionRenames(h.fs.Ops()[ops:], a.ID()); n != 0 {
		t.Errorf("session.json written %d times; want untouched", n)
	}
	if l := look(a, func(_ *projection, l liveFlags) liveFlags { return l }); l.Busy || l.Running || l.Held || l.Settling {
		t.Errorf("the agent is left %+v; want it at rest, not held", l)
	}
}

// wantRefusal fails unless err is a domain error of condition k reading
// text.
func wantRefusal(t *testing.T, err error, k error, text string) {
	t.Helper()
	var d *domainError
	if !errors.As(err, &d) || d.Kind != k || err.Error() != text {
		t.Fatalf("error %v (%T); want a domain error %q reading %q", err, err, k, text)
	}
}
