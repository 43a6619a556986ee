package engine

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/warren-dev/warren/engine/internal/notice"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/tree"
)

// State subscriptions (subscriptions.go) through the real engine: the
// index and the subscriber's log as subscribe and unsubscribe leave them,
// and the notices a transition delivers. (These tests replace those of
// the former package subs, which drove it through a recording fake.)

// watching lists the subscriptions the index holds to target, as
// "id:subscriber", sorted.
func watching(h *harness, target string) string {
	var out []string
	for _, w := range h.c.agents.Watchers(target) {
		out = append(out, w.ID+":"+w.Subscriber)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// hasSub reports whether agent id's projection holds subscription sid.
func hasSub(t *testing.T, h *harness, id, sid string) bool {
	t.Helper()
	_, ok := mustAgent(t, h.c, id).Subscription(sid)
	return ok
}

// mustSubscribe subscribes subscriber with sub, which must take.
func mustSubscribe(t *testing.T, h *harness, subscriber string, sub subscriptionRec) {
	t.Helper()
	if alive, err := h.c.subscribe(subscriber, sub); !alive || err != nil {
		t.Fatalf("subscribe %s: %v, %v", sub.ID, alive, err)
	}
}

// TestSubscribe: subscribing indexes the subscription and logs
// tool.subscribe; a target that is gone gets nothing indexed or logged; a
// refused append takes the index entry back; a subscriber that is not an
// agent is ErrNoAgent.
func TestSubscribe(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.noWake, h.healBackoff = true, -1 })
	root := h.create("root", "", "echo")
	a := h.create("a", root, "echo")
	tg := h.create("t", root, "echo")
	sub := subscriptionRec{ID: "s1", Target: tg, From: "*", To: "idle", Once: true}
	mustSubscribe(t, h, a, sub)
	es := h.entries(a)
	if last := es[len(es)-1]; last.Event != schema.ToolSubscribe ||
		string(last.Data) != fmt.Sprintf(`{"subscription_id":"s1","target_id":%q,"from":"*","to":"idle","once":true}`, tg) {
		t.Fatalf("a's log ends with %s %s; want tool.subscribe s1", last.Event, last.Data)
	}
	if w := watching(h, tg); w != "s1:"+a || !hasSub(t, h, a, "s1") {
		t.Fatalf("index %q, projection has s1: %v; want s1 by a in both", w, hasSub(t, h, a, "s1"))
	}

	gone := h.create("gone", root, "echo")
	if err := h.c.Terminate(context.Background(), gone); err != nil {
		t.Fatal(err)
	}
	n := h.count(a, schema.ToolSubscribe)
	if alive, err := h.c.subscribe(a, subscriptionRec{ID: "s2", Target: gone, From: "*", To: "*"}); alive || err != nil {
		t.Fatalf("subscribe to a gone target = %v, %v", alive, err)
	}
	if m := h.count(a, schema.ToolSubscribe); m != n || watching(h, gone) != "" {
		t.Fatalf("a subscription to a gone target: %d tool.subscribe (want %d), index %q", m, n, watching(h, gone))
	}

	failNextLogWrite(h, a)
	alive, err := h.c.subscribe(a, subscriptionRec{ID: "s3", Target: tg, From: "*", To: "*"})
	if !alive || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("subscribe with a refused append = %v, %v", alive, err)
	}
	if m := h.count(a, schema.ToolSubscribe); m != n || watching(h, tg) != "s1:"+a || hasSub(t, h, a, "s3") {
		t.Fatalf("after a refused append: %d tool.subscribe (want %d), index %q", m, n, watching(h, tg))
	}

	if _, err := h.c.subscribe("nobody", sub); !errors.Is(err, errNotFoundAgent) {
		t.Fatalf("subscribe by no agent: %v", err)
	}
}

// TestUnsubscribe: unsubscribing logs tool.unsubscribe (reason
// "unsubscribed") and unindexes; an unknown subscriber or subscription is
// not known and logs nothing; a refused append says what it was logging
// and leaves the subscription, indexed.
func TestUnsubscribe(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.noWake, h.healBackoff = true, -1 })
	root := h.create("root", "", "echo")
	a := h.create("a", root, "echo")
	tg := h.create("t", root, "echo")
	if known, err := h.c.unsubscribe("nobody", "s1"); known || err != nil {
		t.Fatalf("unsubscribe(no agent) = %v, %v", known, err)
	}
	if known, err := h.c.unsubscribe(a, "s1"); known || err != nil {
		t.Fatalf("unsubscribe(unknown) = %v, %v", known, err)
	}
	if n := h.count(a, schema.ToolUnsubscribe); n != 0 {
		t.Fatalf("%d tool.unsubscribe for unknown subscriptions", n)
	}

	mustSubscribe(t, h, a, subscriptionRec{ID: "s1", Target: tg, From: "*", To: "*"})
	if known, err := h.c.unsubscribe(a, "s1"); !known || err != nil {
		t.Fatalf("unsubscribe = %v, %v", known, err)
	}
	es := h.entries(a)
	if last := es[len(es)-1]; last.Event != schema.ToolUnsubscribe || string(last.Data) != `{"subscription_id":"s1","reason":"unsubscribed"}` {
		t.Fatalf("a's log ends with %s %s; want tool.unsubscribe s1 (unsubscribed)", last.Event, last.Data)
	}
	if w := watching(h, tg); w != "" || hasSub(t, h, a, "s1") {
		t.Fatalf("after unsubscribe: index %q, projection has s1: %v", w, hasSub(t, h, a, "s1"))
	}

	mustSubscribe(t, h, a, subscriptionRec{ID: "s2", Target: tg, From: "*", To: "*"})
	failNextLogWrite(h, a)
	known, err := h.c.unsubscribe(a, "s2")
	if !known || !errors.Is(err, syscall.ENOSPC) || !strings.HasPrefix(err.Error(), "logging tool.unsubscribe: ") {
		t.Fatalf("unsubscribe with a refused append = %v, %v", known, err)
	}
	if n := h.count(a, schema.ToolUnsubscribe); n != 1 || watching(h, tg) != "s2:"+a || !hasSub(t, h, a, "s2") {
		t.Fatalf("after a refused unsubscribe: %d tool.unsubscribe (want 1), index %q, projection has s2: %v",
			n, watching(h, tg), hasSub(t, h, a, "s2"))
	}
}

// TestNotify: a transition notifies the matching subscriptions of live
// subscribers: the notice's id derives from the subscription and the
// transition; a once-subscription is dropped (reason "fired") in the same
// write as its notice; a notice that cannot be enqueued is logged and
// leaves its subscription. A once-subscription whose notice an earlier
// build delivered alone (the subscriber has it) is dropped in a write of
// its own; one that cannot be dropped is logged.
func TestNotify(t *testing.T) {
	logs := &logBuffer{}
	h := newHarness(t, withFakeClock, logInto(logs), func(h *harness) { h.noWake, h.healBackoff, h.maxInbox = true, -1, 2 })
	root := h.create("root", "", "echo")
	worker := h.create("worker", root, "echo")
	a := h.create("a", root, "echo")
	b := h.create("b", root, "echo")
	c := h.create("c", root, "echo")
	mustSubscribe(t, h, a, subscriptionRec{ID: "s1", Target: worker, From: "*", To: "idle"})
	mustSubscribe(t, h, b, subscriptionRec{ID: "s2", Target: worker, From: "*", To: "busy"})
	mustSubscribe(t, h, b, subscriptionRec{ID: "s3", Target: worker, From: "busy", To: "*", Once: true})
	mustSubscribe(t, h, c, subscriptionRec{ID: "s5", Target: worker, From: "*", To: "*", Once: true})
	mustEnqueue(t, h, mailMsg(h, "c1", root, c, "filler"))
	mustEnqueue(t, h, mailMsg(h, "c2", root, c, "filler")) // c's inbox is full
	// The index's watchers, and one whose subscriber is no longer live
	// (termination drops an agent's subscriptions from the index, so only
	// a race hands one out: made by hand here).
	ws := append(h.c.agents.Watchers(worker),
		watcher{Subscription: subscriptionRec{ID: "s4", Target: worker, From: "*", To: "*"}, Subscriber: "gone"})

	writes := logWrites(h, b, func() { h.c.notifyWatchers(ws, "worker", "busy", "idle", "run1/2") })

	want := inbox.Message{ID: notice.ID("state", "s1", "run1/2", "busy", "idle"), Sender: tree.System, Recipient: a,
		Kind: inbox.KindNotification, Payload: notice.StateChange("worker", "busy", "idle"), Timestamp: h.clock.Now(),
		Metadata: map[string]string{"subscription_id": "s1", "agent": "worker", "from": "busy", "to": "idle"}}
	ps := pendingOf(mustAgent(t, h.c, a))
	if len(ps) != 1 {
		t.Fatalf("a has %d messages pending, want the notice", len(ps))
	}
	got := ps[0]
	if got.ID != want.ID || got.Sender != want.Sender || got.Recipient != want.Recipient || got.Kind != want.Kind ||
		got.Payload != want.Payload || !got.Timestamp.Equal(want.Timestamp) || !reflect.DeepEqual(got.Metadata, want.Metadata) {
		t.Fatalf("notice %+v\nwant %+v", got, want)
	}

	id3 := notice.ID("state", "s3", "run1/2", "busy", "idle")
	es := h.entries(b)
	last := es[len(es)-2:]
	if writes != 1 || fmt.Sprint(enqueuedIDs(h, b)) != "["+id3+"]" || last[0].Event != schema.MessageEnqueued ||
		last[1].Event != schema.ToolUnsubscribe || string(last[1].Data) != `{"subscription_id":"s3","reason":"fired"}` {
		t.Fatalf("b: %d writes, enqueued %v, log ending %s, %s %s; want s3's notice then its tool.unsubscribe (fired), in one write",
			writes, enqueuedIDs(h, b), last[0].Event, last[1].Event, last[1].Data)
	}
	if hasSub(t, h, b, "s3") || !hasSub(t, h, b, "s2") {
		t.Fatal("b's projection: want s3 dropped, s2 kept")
	}

	if ids := enqueuedIDs(h, c); fmt.Sprint(ids) != "[c1 c2]" {
		t.Fatalf("c's log enqueued %v, want only its fillers (its inbox is full)", ids)
	}
	if !hasSub(t, h, c, "s5") || !strings.Contains(logs.String(), "[WARN]  delivering a subscription notice: subscriber="+c+" err=") {
		t.Fatalf("c keeps s5: %v; log %q", hasSub(t, h, c, "s5"), logs.String())
	}
	if w := watching(h, worker); w != "s1:"+a+" s2:"+b+" s5:"+c {
		t.Fatalf("index %q; want s3 dropped, the others kept", w)
	}

	// Notices an earlier build delivered without their unsubscribe.
	d := h.create("d", root, "echo")
	s6 := subscriptionRec{ID: "s6", Target: worker, From: "busy", To: "*", Once: true}
	s7 := subscriptionRec{ID: "s7", Target: worker, From: "busy", To: "*", Once: true}
	for _, s := range []subscriptionRec{s6, s7} {
		mustSubscribe(t, h, d, s)
		mustEnqueue(t, h, h.c.stateNotice(watcher{Subscription: s, Subscriber: d}, "worker", "busy", "idle", "run1/3"))
	}
	enq := h.count(d, schema.MessageEnqueued)
	writes = logWrites(h, d, func() {
		h.c.notifyWatchers([]watcher{{Subscription: s6, Subscriber: d}}, "worker", "busy", "idle", "run1/3")
	})
	es = h.entries(d)
	if l := es[len(es)-1]; writes != 1 || h.count(d, schema.MessageEnqueued) != enq ||
		l.Event != schema.ToolUnsubscribe || string(l.Data) != `{"subscription_id":"s6","reason":"fired"}` {
		t.Fatalf("d: %d writes, log ending %s %s; want s6's tool.unsubscribe (fired) alone", writes, l.Event, l.Data)
	}
	if hasSub(t, h, d, "s6") || strings.Contains(watching(h, worker), "s6:") {
		t.Fatal("s6 still in place after it fired")
	}
	failNextLogWrite(h, d)
	h.c.notifyWatchers([]watcher{{Subscription: s7, Subscriber: d}}, "worker", "busy", "idle", "run1/3")
	if !strings.Contains(logs.String(), "[ERROR] removing a fired once-subscription: subscription=s7") {
		t.Fatalf("log %q", logs.String())
	}
	if !hasSub(t, h, d, "s7") || h.count(d, schema.ToolUnsubscribe) != 1 {
		t.Fatal("a once-subscription that could not be dropped: want it kept, nothing logged for it")
	}
}

// TestIndexDropAgent: the index lists the subscriptions to a target; an
// agent that terminates takes the subscriptions to it (returned, for its
// terminated notice) and those it made out of the index.
func TestIndexDropAgent(t *testing.T) {
	var x subIndex
	x.Add(subscriptionRec{ID: "s1", Target: "t", From: "*", To: "idle"}, "a")
	x.Add(subscriptionRec{ID: "s2", Target: "t", From: "busy", To: "*"}, "b")
	x.Add(subscriptionRec{ID: "s3", Target: "a", From: "*", To: "*"}, "t")
	if n := len(x.Of("t")); n != 2 {
		t.Fatalf("%d subscriptions to t, want 2", n)
	}
	w := x.DropAgent("t")
	if len(w) != 2 || len(x.Of("t")) != 0 || len(x.Of("a")) != 0 {
		t.Fatalf("after t terminated: watchers %v, to t %v, to a %v", w, x.Of("t"), x.Of("a"))
	}
	x.Add(subscriptionRec{ID: "s4", Target: "b", From: "*", To: "*"}, "a")
	x.Remove(subscriptionRec{ID: "s4", Target: "b"})
	if len(x.Of("b")) != 0 {
		t.Fatal("Remove left the subscription")
	}
}

func TestMatches(t *testing.T) {
	s := watcher{Subscription: subscriptionRec{From: "*", To: "idle"}}
	if !s.Matches("busy", "idle") || s.Matches("idle", "busy") {
		t.Fatal("from * to idle")
	}
	s.From, s.To = "waiting", "*"
	if !s.Matches("waiting", "idle") || s.Matches("busy", "idle") {
		t.Fatal("from waiting to *")
	}
}
