package subs

import (
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

// fake records every step against the engine and its agents (fakeAgent).
type fake struct {
	calls      []string
	agents     map[string]bool
	subs       map[string]projection.Subscription // subscriber/id
	alive      bool                               // Index's answer
	appendErr  error
	enqueueErr map[string]error // by recipient
	dup        map[string]bool  // EnqueueWith's answer, by recipient
	sent       []inbox.Message
	log        strings.Builder
}

func newFake(agents ...string) *fake {
	f := &fake{agents: map[string]bool{}, subs: map[string]projection.Subscription{}, alive: true, enqueueErr: map[string]error{},
		dup: map[string]bool{}}
	for _, a := range agents {
		f.agents[a] = true
	}
	return f
}

func (f *fake) rec(format string, args ...any) {
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
}

// fakeAgent is agent id of the fake; its steps go to the fake's record.
type fakeAgent struct {
	f  *fake
	id string
}

func (f *fake) Agent(id string) (*fakeAgent, bool) {
	f.rec("agent %s", id)
	return &fakeAgent{f, id}, f.agents[id]
}
func (a *fakeAgent) Subscription(id string) (projection.Subscription, bool) {
	a.f.rec("read %s/%s", a.id, id)
	s, ok := a.f.subs[a.id+"/"+id]
	return s, ok
}
func (a *fakeAgent) Append(event string, data any) (eventlog.Entry, error) {
	a.f.rec("append %s %s %+v", a.id, event, data)
	return eventlog.Entry{}, a.f.appendErr
}
func (f *fake) Index(sub projection.Subscription, subscriber string) bool {
	f.rec("index %s by %s", sub.ID, subscriber)
	return f.alive
}
func (f *fake) Unindex(sub projection.Subscription) { f.rec("unindex %s", sub.ID) }
func (f *fake) Now() time.Time                      { f.rec("now"); return t0 }
func (f *fake) Enqueue(m inbox.Message) error {
	f.rec("enqueue %s", m.Recipient)
	f.sent = append(f.sent, m)
	return f.enqueueErr[m.Recipient]
}
func (f *fake) EnqueueWith(m inbox.Message, with ...eventlog.Record) (bool, error) {
	for _, r := range with {
		f.rec("enqueue %s with %s %+v", m.Recipient, r.Event, r.Data)
	}
	f.sent = append(f.sent, m)
	return f.dup[m.Recipient], f.enqueueErr[m.Recipient]
}
func (f *fake) Logger() hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Output: &f.log, DisableTime: true})
}

func (f *fake) want(t *testing.T, want ...string) {
	t.Helper()
	if !reflect.DeepEqual(f.calls, want) {
		t.Fatalf("steps:\n  %s\nwant:\n  %s", strings.Join(f.calls, "\n  "), strings.Join(want, "\n  "))
	}
	f.calls = nil
}

// Subscribing indexes first (the target checked under the lock
// termination takes), then logs tool.subscribe; a gone target logs
// nothing; a refused append takes the index entry back; a subscriber that
// is not an agent is ErrNoAgent.
func TestSubscribe(t *testing.T) {
	f := newFake("a")
	sub := projection.Subscription{ID: "s1", Target: "t", From: "*", To: "idle", Once: true}
	if alive, err := Subscribe[*fakeAgent](f, "a", sub); !alive || err != nil {
		t.Fatalf("Subscribe = %v, %v", alive, err)
	}
	f.want(t, "agent a", "index s1 by a", "append a tool.subscribe {SubscriptionID:s1 TargetID:t From:* To:idle Once:true}")

	f.alive = false
	if alive, err := Subscribe[*fakeAgent](f, "a", sub); alive || err != nil {
		t.Fatalf("Subscribe to a gone target = %v, %v", alive, err)
	}
	f.want(t, "agent a", "index s1 by a")

	f.alive, f.appendErr = true, errors.New("disk full")
	if alive, err := Subscribe[*fakeAgent](f, "a", sub); !alive || !errors.Is(err, f.appendErr) {
		t.Fatalf("Subscribe with a refused append = %v, %v", alive, err)
	}
	f.want(t, "agent a", "index s1 by a", "append a tool.subscribe {SubscriptionID:s1 TargetID:t From:* To:idle Once:true}", "unindex s1")

	if _, err := Subscribe[*fakeAgent](f, "nobody", sub); !errors.Is(err, toolexec.ErrNoAgent) {
		t.Fatalf("Subscribe by no agent: %v", err)
	}
	f.want(t, "agent nobody")
}

// Unsubscribing logs tool.unsubscribe (reason "unsubscribed") before it
// unindexes; an unknown subscriber or subscription is not known; a refused
// append says what it was logging and leaves the index.
func TestUnsubscribe(t *testing.T) {
	f := newFake("a")
	if known, err := Unsubscribe[*fakeAgent](f, "b", "s1"); known || err != nil {
		t.Fatalf("Unsubscribe(no agent) = %v, %v", known, err)
	}
	if known, err := Unsubscribe[*fakeAgent](f, "a", "s1"); known || err != nil {
		t.Fatalf("Unsubscribe(unknown) = %v, %v", known, err)
	}
	f.want(t, "agent b", "agent a", "read a/s1")

	f.subs["a/s1"] = projection.Subscription{ID: "s1", Target: "t"}
	if known, err := Unsubscribe[*fakeAgent](f, "a", "s1"); !known || err != nil {
		t.Fatalf("Unsubscribe = %v, %v", known, err)
	}
	f.want(t, "agent a", "read a/s1", "append a tool.unsubscribe {SubscriptionID:s1 Reason:unsubscribed}", "unindex s1")

	f.appendErr = errors.New("disk full")
	known, err := Unsubscribe[*fakeAgent](f, "a", "s1")
	if !known || !errors.Is(err, f.appendErr) || !strings.HasPrefix(err.Error(), "logging tool.unsubscribe: ") {
		t.Fatalf("Unsubscribe with a refused append = %v, %v", known, err)
	}
	f.want(t, "agent a", "read a/s1", "append a tool.unsubscribe {SubscriptionID:s1 Reason:unsubscribed}")
}

// A transition notifies the matching subscriptions of live subscribers:
// the notice's id derives from the subscription and the transition, a
// once-subscription is dropped (reason "fired") in the same write as its
// notice, and a notice that cannot be enqueued is logged and leaves its
// subscription.
func TestNotify(t *testing.T) {
	f := newFake("a", "b", "c")
	w := []Sub{
		{Subscription: projection.Subscription{ID: "s1", Target: "t", From: "*", To: "idle"}, Subscriber: "a"},
		{Subscription: projection.Subscription{ID: "s2", Target: "t", From: "*", To: "busy"}, Subscriber: "b"},
		{Subscription: projection.Subscription{ID: "s3", Target: "t", From: "busy", To: "*", Once: true}, Subscriber: "b"},
		{Subscription: projection.Subscription{ID: "s4", Target: "t", From: "*", To: "*"}, Subscriber: "gone"},
		{Subscription: projection.Subscription{ID: "s5", Target: "t", From: "*", To: "*", Once: true}, Subscriber: "c"},
	}
	f.enqueueErr["c"] = errors.New("inbox full")
	Notify[*fakeAgent](f, w, "worker", "busy", "idle", "run1/2")
	f.want(t, "agent a", "now", "enqueue a",
		"agent b", "now", "enqueue b with tool.unsubscribe {SubscriptionID:s3 Reason:fired}", "unindex s3",
		"agent gone",
		"agent c", "now", "enqueue c with tool.unsubscribe {SubscriptionID:s5 Reason:fired}")
	want := inbox.Message{ID: notice.ID("state", "s1", "run1/2", "busy", "idle"), Sender: tree.System, Recipient: "a",
		Kind: inbox.KindNotification, Payload: notice.StateChange("worker", "busy", "idle"), Timestamp: t0,
		Metadata: map[string]string{"subscription_id": "s1", "agent": "worker", "from": "busy", "to": "idle"}}
	if !reflect.DeepEqual(f.sent[0], want) {
		t.Fatalf("notice %+v\nwant %+v", f.sent[0], want)
	}
	if !strings.Contains(f.log.String(), `[WARN]  delivering a subscription notice: subscriber=c err="inbox full"`) {
		t.Fatalf("log %q", f.log.String())
	}

	// A once-subscription whose notice an earlier build delivered (the
	// recipient has it) is dropped in a write of its own; one that cannot
	// be dropped is logged.
	f.log.Reset()
	f.dup["b"] = true
	Notify[*fakeAgent](f, w[2:3], "worker", "busy", "idle", "run1/3")
	f.want(t, "agent b", "now", "enqueue b with tool.unsubscribe {SubscriptionID:s3 Reason:fired}",
		"append b tool.unsubscribe {SubscriptionID:s3 Reason:fired}", "unindex s3")
	f.appendErr = errors.New("disk full")
	Notify[*fakeAgent](f, w[2:3], "worker", "busy", "idle", "run1/3")
	if !strings.Contains(f.log.String(), "[ERROR] removing a fired once-subscription: subscription=s3") {
		t.Fatalf("log %q", f.log.String())
	}
}
