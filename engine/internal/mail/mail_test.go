package mail

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/engine/internal/notice"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/toolexec"
	"github.com/warren-dev/warren/tree"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// box is an agent's inbox as the fake holds it.
type box struct{ has, terminated, corrupt bool }

// fake records every step against the engine and its agents (fakeAgent).
type fake struct {
	calls      []string
	agents     map[string]*box
	userHas    bool
	userClosed bool
	reserveErr error
	appendErr  error
	failure    Failure
	fillErr    error
	sent       []inbox.Message
	log        strings.Builder
}

func newFake() *fake {
	return &fake{agents: map[string]*box{"a": {}}}
}

func (f *fake) rec(format string, args ...any) {
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
}

// fakeAgent is agent id of the fake; its steps go to the fake's record.
type fakeAgent struct {
	f  *fake
	id string
}

func (a *fakeAgent) String() string { return a.id }

func (f *fake) Agent(id string) (*fakeAgent, bool) {
	f.rec("agent %s", id)
	return &fakeAgent{f, id}, f.agents[id] != nil
}
func (a *fakeAgent) Inbox(id string) (bool, bool, bool) {
	a.f.rec("inbox %s %s", a.id, id)
	b := a.f.agents[a.id]
	return b.has, b.terminated, b.corrupt
}
func (f *fake) Reserve(a *fakeAgent, m inbox.Message) error {
	f.rec("reserve %s %s", a, m.ID)
	return f.reserveErr
}
func (f *fake) ReserveUser(m inbox.Message) error {
	f.rec("reserve USER %s", m.ID)
	return f.reserveErr
}
func (f *fake) Release(id string)      { f.rec("release %s", id) }
func (f *fake) UserOpen() bool         { f.rec("user open?"); return !f.userClosed }
func (f *fake) UserHas(id string) bool { f.rec("user has %s", id); return f.userHas }
func (a *fakeAgent) Append(event string, data any) (eventlog.Entry, error) {
	f := a.f
	f.rec("append %s %s %v", a.id, event, data.(map[string]any)["message_id"])
	if f.appendErr == nil {
		f.sent = append(f.sent, msgOf(data))
	}
	return eventlog.Entry{}, f.appendErr
}
func (a *fakeAgent) AppendBatch(recs []eventlog.Record) ([]eventlog.Entry, error) {
	for _, r := range recs {
		a.f.rec("append %s %s %+v", a.id, r.Event, r.Data)
	}
	return nil, a.f.appendErr
}
func (f *fake) AppendUser(m inbox.Message) error { f.rec("append USER %s", m.ID); return f.appendErr }
func (f *fake) Poke(a *fakeAgent)                { f.rec("poke %s", a.id) }
func (a *fakeAgent) Failed(max int) Failure {
	a.f.rec("failed %s %d", a.id, max)
	return a.f.failure
}
func (f *fake) FillPayloads(owner string, msgs []inbox.Message) ([]inbox.Message, error) {
	f.rec("fill %s %d", owner, len(msgs))
	if f.fillErr != nil {
		return nil, f.fillErr
	}
	out := make([]inbox.Message, len(msgs))
	for i, m := range msgs {
		out[i] = m
		out[i].Payload = "full " + m.ID
	}
	return out, nil
}
func (f *fake) DisplayName(id string) string { return "name-of-" + id }
func (a *fakeAgent) TransitionKey() string   { a.f.rec("key %s", a.id); return "run9/1" }
func (f *fake) Now() time.Time               { f.rec("now"); return t0 }
func (f *fake) Logger() hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Output: &f.log, DisableTime: true})
}

// msgOf decodes a message.enqueued entry's data as the fold would.
func msgOf(data any) inbox.Message {
	b, err := json.Marshal(data)
	if err != nil {
		panic(err)
	}
	m, err := inbox.FromEventData(b)
	if err != nil {
		panic(err)
	}
	return m
}

func (f *fake) want(t *testing.T, want ...string) {
	t.Helper()
	if !reflect.DeepEqual(f.calls, want) {
		t.Fatalf("steps:\n  %s\nwant:\n  %s", strings.Join(f.calls, "\n  "), strings.Join(want, "\n  "))
	}
	f.calls = nil
}

func msg(id, to string) inbox.Message {
	return inbox.Message{ID: id, Sender: "s", Recipient: to, Kind: inbox.KindRequest, Payload: "hi", Metadata: map[string]string{}}
}

// The checks in their order: USER has it (skip) or needs room; an agent
// must be live, has it (skip, before any other refusal), is terminated,
// has a damaged log, or needs room; the texts name the recipient and the
// way out.
func TestCheck(t *testing.T) {
	f := newFake()
	f.userHas = true
	if skip, err := Check[*fakeAgent](f, msg("m1", tree.User)); !skip || err != nil {
		t.Fatalf("USER has it: %v, %v", skip, err)
	}
	f.want(t, "user has m1")
	f.userHas, f.reserveErr = false, toolexec.ErrInboxFull
	if skip, err := Check[*fakeAgent](f, msg("m1", tree.User)); skip || !errors.Is(err, toolexec.ErrInboxFull) {
		t.Fatalf("USER full: %v, %v", skip, err)
	}
	f.want(t, "user has m1", "reserve USER m1")
	f.reserveErr = nil

	if _, err := Check[*fakeAgent](f, msg("m1", "x")); !errors.Is(err, toolexec.ErrNoAgent) || err.Error() != "recipient x: "+toolexec.ErrNoAgent.Error() {
		t.Fatalf("no recipient: %v", err)
	}
	f.want(t, "agent x")

	f.agents["a"] = &box{has: true, terminated: true, corrupt: true}
	if skip, err := Check[*fakeAgent](f, msg("m1", "a")); !skip || err != nil {
		t.Fatalf("a duplicate: %v, %v; want skip first", skip, err)
	}
	f.want(t, "agent a", "inbox a m1")

	f.agents["a"] = &box{terminated: true, corrupt: true}
	if _, err := Check[*fakeAgent](f, msg("m1", "a")); !errors.Is(err, toolexec.ErrNoAgent) || !strings.HasPrefix(err.Error(), "recipient a is terminated: ") {
		t.Fatalf("terminated: %v", err)
	}
	f.agents["a"] = &box{corrupt: true}
	if _, err := Check[*fakeAgent](f, msg("m1", "a")); !errors.Is(err, toolexec.ErrNoAgent) || !strings.HasPrefix(err.Error(), "recipient a has a damaged log (warren repair): ") {
		t.Fatalf("corrupt: %v", err)
	}
	f.want(t, "agent a", "inbox a m1", "agent a", "inbox a m1")

	f.agents["a"] = &box{}
	f.reserveErr = errors.New("the inbox of a holds ...: full")
	if skip, err := Check[*fakeAgent](f, msg("m1", "a")); skip || err != f.reserveErr {
		t.Fatalf("full: %v, %v; want the reservation's error as it is", skip, err)
	}
	f.want(t, "agent a", "inbox a m1", "reserve a m1")
}

// Append logs message.enqueued, then pokes; the room is released last,
// whatever happened; a refused append says for whom and pokes nobody.
func TestAppend(t *testing.T) {
	f := newFake()
	if err := Append[*fakeAgent](f, msg("m1", "a")); err != nil {
		t.Fatal(err)
	}
	f.want(t, "agent a", "append a message.enqueued m1", "poke a", "release m1")

	if err := Append[*fakeAgent](f, msg("m2", tree.User)); err != nil {
		t.Fatal(err)
	}
	f.want(t, "append USER m2", "release m2")

	if err := Append[*fakeAgent](f, msg("m3", "x")); !errors.Is(err, toolexec.ErrNoAgent) {
		t.Fatalf("no recipient: %v", err)
	}
	f.want(t, "agent x", "release m3")

	f.appendErr = errors.New("disk full")
	err := Append[*fakeAgent](f, msg("m4", "a"))
	if !errors.Is(err, f.appendErr) || !strings.HasPrefix(err.Error(), "logging message.enqueued for a: ") {
		t.Fatalf("refused append: %v", err)
	}
	f.want(t, "agent a", "append a message.enqueued m4", "release m4")
}

// Send appends what the checks let through, once; Redeliver does too,
// and the limits do not refuse it, though the other checks do.
func TestSendAndRedeliver(t *testing.T) {
	f := newFake()
	if err := Send[*fakeAgent](f, msg("m1", "a")); err != nil {
		t.Fatal(err)
	}
	f.want(t, "agent a", "inbox a m1", "reserve a m1", "agent a", "append a message.enqueued m1", "poke a", "release m1")
	f.agents["a"].has = true
	if err := Send[*fakeAgent](f, msg("m1", "a")); err != nil {
		t.Fatal(err)
	}
	f.want(t, "agent a", "inbox a m1")

	f.agents["a"].has = false
	f.reserveErr = fmt.Errorf("over the limit: %w", toolexec.ErrInboxFull)
	if err := Send[*fakeAgent](f, msg("m2", "a")); !errors.Is(err, toolexec.ErrInboxFull) {
		t.Fatalf("Send to a full inbox: %v", err)
	}
	f.want(t, "agent a", "inbox a m2", "reserve a m2")
	if err := Redeliver[*fakeAgent](f, msg("m2", "a")); err != nil {
		t.Fatalf("Redeliver to a full inbox: %v", err)
	}
	f.want(t, "agent a", "inbox a m2", "reserve a m2", "agent a", "append a message.enqueued m2", "poke a", "release m2")

	f.agents["a"].terminated = true
	if err := Redeliver[*fakeAgent](f, msg("m3", "a")); !errors.Is(err, toolexec.ErrNoAgent) {
		t.Fatalf("Redeliver to a terminated agent: %v", err)
	}
	f.want(t, "agent a", "inbox a m3")
}

// SendWith logs its records in the same write as message.enqueued; a
// recipient that has the message gets nothing (dup); the USER inbox takes
// no records.
func TestSendWith(t *testing.T) {
	f := newFake()
	unsub := eventlog.Record{Event: "tool.unsubscribe", Data: "s1"}
	dup, err := SendWith[*fakeAgent](f, msg("m1", "a"), unsub)
	if dup || err != nil {
		t.Fatalf("SendWith = %v, %v", dup, err)
	}
	f.want(t, "agent a", "inbox a m1", "reserve a m1", "agent a",
		"append a message.enqueued "+fmt.Sprintf("%+v", msg("m1", "a").EventData()), "append a tool.unsubscribe s1",
		"poke a", "release m1")
	f.agents["a"].has = true
	if dup, err := SendWith[*fakeAgent](f, msg("m1", "a"), unsub); !dup || err != nil {
		t.Fatalf("SendWith of a message the recipient has = %v, %v; want dup", dup, err)
	}
	f.want(t, "agent a", "inbox a m1")
	if _, err := SendWith[*fakeAgent](f, msg("m2", tree.User), unsub); err == nil || !strings.Contains(err.Error(), "USER") {
		t.Fatalf("SendWith to USER with records: %v", err)
	}
}

// A failed turn is told to the parent once per transition: the child's
// first pending messages listed with their payloads read back and their
// senders' names; a root tells nobody; payloads that cannot be read are
// listed as they are; a notice that cannot be sent is logged.
func TestChildFailed(t *testing.T) {
	f := newFake()
	f.agents["p"] = &box{}
	f.failure = Failure{ID: "a", Name: "kid", LastErr: "boom", Total: 3}
	ChildFailed[*fakeAgent](f, &fakeAgent{f, "a"})
	f.want(t, "failed a 20")

	f.failure.Parent = "p"
	f.failure.Pending = []inbox.Message{{ID: "q1", Sender: "u"}, {ID: "q2", Sender: "v", Payload: "short"}}
	ChildFailed[*fakeAgent](f, &fakeAgent{f, "a"})
	id := notice.ID("failed", "a", "run9/1")
	f.want(t, "failed a 20", "fill a 2", "key a", "now", "agent p", "inbox p "+id, "reserve p "+id,
		"agent p", "append p message.enqueued "+id, "poke p", "release "+id)
	text := notice.ChildFailed("kid", "boom", 3, []notice.Pending{{From: "name-of-u", Text: "full q1"}, {From: "name-of-v", Text: "full q2"}})
	want := inbox.Message{ID: id, Sender: tree.System, Recipient: "p", Kind: inbox.KindError, Payload: text,
		Timestamp: t0, Metadata: map[string]string{"failed_agent": "a"}}
	if got := f.sent[0]; !reflect.DeepEqual(got, want) {
		t.Fatalf("notice %+v\nwant %+v", got, want)
	}

	f.sent, f.fillErr = nil, errors.New("unreadable")
	f.agents["p"].has = false
	ChildFailed[*fakeAgent](f, &fakeAgent{f, "a"})
	f.calls = nil
	text = notice.ChildFailed("kid", "boom", 3, []notice.Pending{{From: "name-of-u", Text: ""}, {From: "name-of-v", Text: "short"}})
	if f.sent[0].Payload != text {
		t.Fatalf("payload %q\nwant %q", f.sent[0].Payload, text)
	}

	delete(f.agents, "p")
	ChildFailed[*fakeAgent](f, &fakeAgent{f, "a"})
	if !strings.Contains(f.log.String(), "[ERROR] notifying parent of a failed turn: agent=a parent=p err=") {
		t.Fatalf("log %q", f.log.String())
	}
}

// A recorded message is lacking when its recipient is a live agent with
// an undamaged log that has not had it, or USER (unless left out, or its
// inbox is not open yet) without it.
func TestLacks(t *testing.T) {
	f := newFake()
	ref := func(id, to string) projection.SentRef { return projection.SentRef{ID: id, To: to} }
	cases := []struct {
		name       string
		s          projection.SentRef
		agentsOnly bool
		set        func()
		want       bool
	}{
		{"agent lacks it", ref("m1", "a"), true, func() {}, true},
		{"agent has it", ref("m1", "a"), false, func() { f.agents["a"].has = true }, false},
		{"agent's log damaged", ref("m1", "a"), false, func() { f.agents["a"] = &box{corrupt: true} }, false},
		{"agent terminated", ref("m1", "a"), false, func() { f.agents["a"] = &box{terminated: true} }, true},
		{"no agent", ref("m1", "x"), false, func() {}, false},
		{"USER lacks it", ref("m1", tree.User), false, func() {}, true},
		{"USER left out", ref("m1", tree.User), true, func() {}, false},
		{"USER has it", ref("m1", tree.User), false, func() { f.userHas = true }, false},
		{"USER not open", ref("m1", tree.User), false, func() { f.userHas, f.userClosed = false, true }, false},
	}
	for _, tc := range cases {
		f.agents["a"] = &box{}
		tc.set()
		if got := Lacks[*fakeAgent](f, tc.s, tc.agentsOnly); got != tc.want {
			t.Errorf("%s: Lacks = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The messages a turn took are marked delivered in one write to their
// agent's log.
func TestDelivered(t *testing.T) {
	f := newFake()
	if err := Delivered[*fakeAgent](f, "a", []string{"m1", "m2"}); err != nil {
		t.Fatal(err)
	}
	f.want(t, "agent a", "append a message.delivered {MessageID:m1}", "append a message.delivered {MessageID:m2}")
	if err := Delivered[*fakeAgent](f, "x", []string{"m1"}); !errors.Is(err, toolexec.ErrNoAgent) {
		t.Fatalf("Delivered to no agent: %v", err)
	}
}
