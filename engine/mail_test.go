package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/engine/internal/notice"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/tree"
)

// How a message reaches an inbox (mail.go), through the real engine: the
// checks before an enqueue and their order, the append and the poke, the
// records enqueueWith writes with a message, a failed turn's notice to the
// parent, what redelivery finds lacking and delivers, and
// message.delivered. (These tests replace those of the former packages
// mail and redeliver, which drove them through recording fakes.)

// TestCheck: the checks in their order. A message USER has is skipped
// (before its room is looked at), one it lacks needs room; an agent
// recipient must be live, has it (skipped, before any other refusal), is
// terminated, has a damaged log, or needs room (the limit's refusal as it
// is). The texts name the recipient and the way out. (The former test
// gave one recipient a duplicate, a termination and a damaged log at
// once; terminate refuses an agent whose log is damaged, so the real
// engine shows the duplicate checked first against each apart.)
func TestCheck(t *testing.T) {
	held := newStopHeld()
	h := newHarness(t, withStopHeld(held), func(h *harness) { h.noWake, h.maxInbox = true, 1 })
	root := h.create("root", "", "echo")
	kid := h.create("kid", root, "echo")

	u1 := mailMsg(h, "u1", root, tree.User, "hi")
	mustEnqueue(t, h, u1)
	if skip, err := h.c.checkSend(u1); !skip || err != nil {
		t.Fatalf("USER has it (its inbox full): %v, %v; want skip", skip, err)
	}
	if skip, err := h.c.checkSend(mailMsg(h, "u2", root, tree.User, "hi")); skip || !errors.Is(err, errInboxFull) {
		t.Fatalf("USER full: %v, %v; want inbox full", skip, err)
	}

	if _, err := h.c.checkSend(mailMsg(h, "m1", root, "x", "hi")); !errors.Is(err, errNotFoundAgent) ||
		err.Error() != "recipient x: "+errNotFoundAgent.Error() {
		t.Fatalf("no recipient: %v", err)
	}

	k1 := mailMsg(h, "k1", root, kid, "hi")
	mustEnqueue(t, h, k1)
	if skip, err := h.c.checkSend(k1); !skip || err != nil {
		t.Fatalf("a duplicate (the inbox full): %v, %v; want skip", skip, err)
	}
	_, err := h.c.checkSend(mailMsg(h, "k2", root, kid, "hi"))
	if !errors.Is(err, errInboxFull) || !strings.HasPrefix(err.Error(), "the inbox of kid holds 1 pending messages") {
		t.Fatalf("full: %v; want the limit's refusal as it is", err)
	}
	if n := h.c.resv.Len(); n != 0 {
		t.Fatalf("%d reservations left by refused and skipped checks", n)
	}

	// Terminated (the log records it; the agent is still listed): a
	// message it has is skipped first, any other refused.
	leaf := createHeld(h, "leaf", root)
	l1 := mailMsg(h, "l1", root, leaf, "hi")
	mustEnqueue(t, h, l1)
	finish := terminating(t, h, held, leaf)
	if skip, err := h.c.checkSend(l1); !skip || err != nil {
		t.Fatalf("a duplicate to a terminated agent: %v, %v; want skip first", skip, err)
	}
	if _, err := h.c.checkSend(mailMsg(h, "l2", root, leaf, "hi")); !errors.Is(err, errNotFoundAgent) ||
		!strings.HasPrefix(err.Error(), "recipient "+leaf+" is terminated: ") {
		t.Fatalf("terminated: %v", err)
	}
	finish()

	// A damaged log: a message it has is skipped first, any other refused.
	bad := h.create("bad", root, "echo")
	b1 := mailMsg(h, "b1", root, bad, "hi")
	mustEnqueue(t, h, b1)
	h.send(bad, "more lines after b1's")
	damageLog(t, h, bad)
	if skip, err := h.c.checkSend(b1); !skip || err != nil {
		t.Fatalf("a duplicate to a damaged log: %v, %v; want skip first", skip, err)
	}
	if _, err := h.c.checkSend(mailMsg(h, "b2", root, bad, "hi")); !errors.Is(err, errNotFoundAgent) ||
		!strings.HasPrefix(err.Error(), "recipient "+bad+" has a damaged log (warren repair): ") {
		t.Fatalf("corrupt: %v", err)
	}
}

// TestAppend: appendMessage logs message.enqueued, then pokes (a new
// message retries an agent whose last turn failed); the room is released
// whatever happened; a message to USER goes to its inbox; a recipient
// gone since the check is ErrNoAgent; a refused append says for whom,
// logs nothing and pokes nobody.
func TestAppend(t *testing.T) {
	held := newStopHeld()
	h := newHarness(t, withStopHeld(held), func(h *harness) { h.healBackoff = -1 })
	var failed atomic.Bool
	h.prov.Register("fails-once", func(_ context.Context, tr *inproc.Turn) (string, error) {
		if failed.CompareAndSwap(false, true) {
			return "", errors.New("boom")
		}
		return "ok", nil
	})
	h.prov.Register("quiet", inproc.Reply("noted"))
	root := h.create("root", "", "quiet")
	kid := h.create("kid", root, "fails-once")
	mustEnqueue(t, h, mailMsg(h, "k0", root, kid, "first"))
	h.until("kid's first turn failed", func() bool { return h.count(kid, schema.TurnFailed) == 1 })
	h.quiet()
	if n := h.count(kid, schema.TurnStart); n != 1 {
		t.Fatalf("kid started %d turns, want 1 (a failed turn is not retried by itself)", n)
	}

	// Refused while kid is held after its failed turn, k0 pending: a poke
	// would retry it.
	m4 := mailMsg(h, "m4", root, kid, "refused")
	if _, err := h.c.checkSend(m4); err != nil {
		t.Fatal(err)
	}
	failNextLogWrite(h, kid)
	err := h.c.appendMessage(m4, nil)
	if !errors.Is(err, syscall.ENOSPC) || !strings.HasPrefix(err.Error(), "logging message.enqueued for "+kid+": ") {
		t.Fatalf("refused append: %v", err)
	}
	if n := h.c.resv.Len(); n != 0 {
		t.Fatalf("%d reservations after a refused append", n)
	}
	h.quiet()
	if ids := enqueuedIDs(h, kid); countOf(ids, "m4") != 0 {
		t.Fatalf("kid's log enqueued %v; a refused append logs nothing", ids)
	}
	if n := h.count(kid, schema.TurnStart); n != 1 {
		t.Fatalf("a refused append retried the failed kid (%d turn.start, want 1)", n)
	}

	m1 := mailMsg(h, "m1", root, kid, "second")
	if skip, err := h.c.checkSend(m1); skip || err != nil {
		t.Fatalf("check: %v, %v", skip, err)
	}
	if err := h.c.appendMessage(m1, nil); err != nil {
		t.Fatal(err)
	}
	if ids := enqueuedIDs(h, kid); countOf(ids, "m1") != 1 {
		t.Fatalf("kid's log enqueued %v, want m1 once", ids)
	}
	if n := h.c.resv.Len(); n != 0 {
		t.Fatalf("%d reservations after the append", n)
	}
	h.until("the poked kid ran a turn", func() bool { return h.count(kid, schema.TurnComplete) == 1 })
	h.quiet()
	if n := pendingLen(mustAgent(t, h.c, kid)); n != 0 {
		t.Fatalf("the poked turn left %d messages pending; want k0 and m1 taken", n)
	}

	m2 := mailMsg(h, "m2", root, tree.User, "to you")
	if _, err := h.c.checkSend(m2); err != nil {
		t.Fatal(err)
	}
	if err := h.c.appendMessage(m2, nil); err != nil {
		t.Fatal(err)
	}
	if !h.c.user.Has("m2") || h.c.resv.Len() != 0 {
		t.Fatalf("USER has m2: %v, reservations %d; want it in the inbox, none held", h.c.user.Has("m2"), h.c.resv.Len())
	}

	leaf := createHeld(h, "leaf", root)
	h.quiet()
	m3 := mailMsg(h, "m3", root, leaf, "late")
	if _, err := h.c.checkSend(m3); err != nil {
		t.Fatal(err)
	}
	held.let()
	if err := h.c.Terminate(context.Background(), leaf); err != nil {
		t.Fatal(err)
	}
	if err := h.c.appendMessage(m3, nil); !errors.Is(err, errNotFoundAgent) {
		t.Fatalf("append to a recipient gone since the check: %v", err)
	}
	if n := h.c.resv.Len(); n != 0 {
		t.Fatalf("%d reservations after a failed append", n)
	}
}

// TestSendAndRedeliver: enqueue appends what the checks let through, once;
// a redelivery (the message recorded as sent in its sender's log) passes
// the same checks but the limits, which refuse new sends only: it reaches
// a full inbox, and not a terminated recipient.
func TestSendAndRedeliver(t *testing.T) {
	held := newStopHeld()
	h := newHarness(t, withStopHeld(held), func(h *harness) { h.noWake, h.maxInbox = true, 1 })
	root := h.create("root", "", "echo")
	kid := h.create("kid", root, "echo")
	m1 := mailMsg(h, "m1", root, kid, "one")
	mustEnqueue(t, h, m1)
	mustEnqueue(t, h, m1)
	if ids := enqueuedIDs(h, kid); fmt.Sprint(ids) != "[m1]" {
		t.Fatalf("kid's log enqueued %v, want m1 once", ids)
	}

	m2 := mailMsg(h, "m2", root, kid, "two")
	if err := h.c.enqueue(m2); !errors.Is(err, errInboxFull) {
		t.Fatalf("enqueue to a full inbox: %v", err)
	}
	h.c.redeliverRefs(context.Background(), root, recordSent(t, h, root, m2), false)
	if ids := enqueuedIDs(h, kid); fmt.Sprint(ids) != "[m1 m2]" {
		t.Fatalf("kid's log enqueued %v after the redelivery to its full inbox, want [m1 m2]", ids)
	}
	if n := h.c.resv.Len(); n != 0 {
		t.Fatalf("%d reservations after the redelivery", n)
	}

	leaf := createHeld(h, "leaf", root)
	refs := recordSent(t, h, root, mailMsg(h, "m3", root, leaf, "three"))
	finish := terminating(t, h, held, leaf)
	h.c.redeliverRefs(context.Background(), root, refs, false)
	finish()
	if ids := enqueuedIDs(h, leaf); len(ids) != 0 {
		t.Fatalf("a terminated recipient's log enqueued %v by redelivery, want nothing", ids)
	}
}

// TestSendWith: enqueueWith logs its records in the same write as the
// message's message.enqueued, after it; a recipient that has the message
// gets nothing (dup); the USER inbox takes no records.
func TestSendWith(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.noWake = true })
	root := h.create("root", "", "echo")
	kid := h.create("kid", root, "echo")
	sub := subscriptionRec{ID: "s1", Target: root, From: "*", To: "*", Once: true}
	if alive, err := h.c.subscribe(kid, sub); !alive || err != nil {
		t.Fatalf("subscribe: %v, %v", alive, err)
	}
	unsub := eventlog.Record{Event: schema.ToolUnsubscribe, Data: schema.UnsubscribeData{SubscriptionID: "s1", Reason: "fired"}}
	m1 := mailMsg(h, "m1", root, kid, "one")
	var dup bool
	var err error
	writes := logWrites(h, kid, func() { dup, err = h.c.enqueueWith(m1, unsub) })
	if dup || err != nil {
		t.Fatalf("enqueueWith = %v, %v", dup, err)
	}
	es := h.entries(kid)
	last := es[len(es)-2:]
	if writes != 1 || last[0].Event != schema.MessageEnqueued || dataOf(t, last[0])["message_id"] != "m1" ||
		last[1].Event != schema.ToolUnsubscribe || string(last[1].Data) != `{"subscription_id":"s1","reason":"fired"}` {
		t.Fatalf("%d writes ending the log with %s %s, %s %s; want message.enqueued m1 then the record, in one write",
			writes, last[0].Event, last[0].Data, last[1].Event, last[1].Data)
	}
	if _, ok := mustAgent(t, h.c, kid).Subscription("s1"); ok {
		t.Fatal("the subscription is still in kid's projection after its tool.unsubscribe")
	}
	if n := h.c.resv.Len(); n != 0 {
		t.Fatalf("%d reservations after enqueueWith", n)
	}

	writes = logWrites(h, kid, func() { dup, err = h.c.enqueueWith(m1, unsub) })
	if !dup || err != nil || writes != 0 {
		t.Fatalf("enqueueWith of a message kid has = %v, %v with %d writes; want dup and nothing written", dup, err, writes)
	}

	if _, err := h.c.enqueueWith(mailMsg(h, "m2", root, tree.User, "two"), unsub); err == nil || !strings.Contains(err.Error(), "USER") {
		t.Fatalf("enqueueWith to USER with records: %v", err)
	}
	if h.c.user.Has("m2") || h.c.resv.Len() != 0 {
		t.Fatalf("USER has m2: %v, reservations %d; want neither", h.c.user.Has("m2"), h.c.resv.Len())
	}
}

// lastFailure is the run, turn and error of agent id's last turn.failed.
func lastFailure(t *testing.T, h *harness, id string) (key, lastErr string) {
	t.Helper()
	for _, e := range h.entries(id) {
		if e.Event == schema.TurnFailed {
			d := dataOf(t, e)
			key, lastErr = fmt.Sprintf("%s/%v", d["run_id"], d["turn"]), d["error"].(string)
		}
	}
	if key == "" {
		t.Fatalf("agent %s has no turn.failed", id)
	}
	return key, lastErr
}

// TestChildFailed: a failed turn is told to the parent once per
// transition (the notice's id names the failed run's turn), from SYSTEM,
// listing the child's first pending messages with their payloads read
// back from its log and their senders' names; a root tells nobody;
// payloads that cannot be read are listed as they are; a notice that
// cannot be sent is logged.
func TestChildFailed(t *testing.T) {
	logs := &logBuffer{}
	h := newHarness(t, logInto(logs), func(h *harness) { h.noWake, h.maxInbox = true, 2 })
	h.prov.Register("boom", func(context.Context, *inproc.Turn) (string, error) { return "", errors.New("boom") })
	root := h.create("root", "", "boom")
	if res := h.send(root, "go"); res.Err == nil {
		t.Fatalf("root's turn: %+v, want it failed", res)
	}
	if n := h.count(root, schema.MessageEnqueued); n != 0 || h.c.UserPendingCount() != 0 {
		t.Fatalf("a root's failed turn told someone: %d messages to it, %d to USER", n, h.c.UserPendingCount())
	}

	kid := h.create("kid", root, "boom")
	big := "BIG " + strings.Repeat("x", 2*residentPayload)
	mustEnqueue(t, h, mailMsg(h, "q1", root, kid, big))
	mustEnqueue(t, h, mailMsg(h, "q2", tree.User, kid, "short"))
	k := mustAgent(t, h.c, kid)
	if ps := pendingOf(k); len(ps) != 2 || !ps[0].Spilled() {
		t.Fatalf("kid's pending %+v; want q1 with its payload left in the log", ps)
	}
	if res := h.send(kid, "go"); res.Err == nil {
		t.Fatalf("kid's turn: %+v, want it failed", res)
	}
	key, lastErr := lastFailure(t, h, kid)
	if !strings.Contains(lastErr, "boom") {
		t.Fatalf("turn.failed error %q", lastErr)
	}
	id := notice.ID("failed", kid, key)
	want := notice.ChildFailed("kid", lastErr, 2, []notice.Pending{{From: "root", Text: big}, {From: tree.User, Text: "short"}})
	r := mustAgent(t, h.c, root)
	var got *inbox.Message
	for _, m := range pendingOf(r) {
		if m.ID == id {
			m := m
			got = &m
		}
	}
	if got == nil {
		t.Fatalf("root's pending %+v lacks the notice %s", pendingOf(r), id)
	}
	full, err := h.c.fillPayloads(context.Background(), root, []inbox.Message{*got})
	if err != nil {
		t.Fatal(err)
	}
	if n := full[0]; n.Sender != tree.System || n.Recipient != root || n.Kind != inbox.KindError || n.Payload != want ||
		len(n.Metadata) != 1 || n.Metadata["failed_agent"] != kid {
		t.Fatalf("notice %+v\nwant from SYSTEM to root, kind error, metadata failed_agent, payload %q", n, want)
	}
	h.c.childFailed(k) // told again, as recovery may
	if ids := enqueuedIDs(h, root); len(ids) != 1 || ids[0] != id {
		t.Fatalf("root's log enqueued %v; want the notice once", ids)
	}

	// Payloads that cannot be read back are listed as they are.
	h.fs.Inject(faultfs.Rule{Kind: faultfs.OpRead, Path: kid + "/events.jsonl", Err: syscall.EIO, Sticky: true})
	res := h.send(kid, "again")
	h.fs.ClearRules()
	if res.Err == nil {
		t.Fatalf("kid's second turn: %+v, want it failed", res)
	}
	key2, lastErr2 := lastFailure(t, h, kid)
	id2 := notice.ID("failed", kid, key2)
	if id2 == id {
		t.Fatal("two failed turns named one transition")
	}
	want = notice.ChildFailed("kid", lastErr2, 2, []notice.Pending{{From: "root", Text: ""}, {From: tree.User, Text: "short"}})
	found := false
	for _, e := range h.entries(root) {
		if d := dataOf(t, e); e.Event == schema.MessageEnqueued && d["message_id"] == id2 {
			found = true
			if d["payload"] != want {
				t.Fatalf("notice with unreadable payloads %q\nwant %q", d["payload"], want)
			}
		}
	}
	if !found {
		t.Fatalf("root's log lacks the second notice %s", id2)
	}

	// The parent's inbox is full now (two notices): the third is logged.
	if res := h.send(kid, "third"); res.Err == nil {
		t.Fatalf("kid's third turn: %+v, want it failed", res)
	}
	if n := len(enqueuedIDs(h, root)); n != 2 {
		t.Fatalf("root's log enqueued %d notices, want 2 (its inbox full)", n)
	}
	if s := logs.String(); !strings.Contains(s, "[ERROR] notifying parent of a failed turn: agent="+kid+" parent="+root+" err=") {
		t.Fatalf("log %q", s)
	}
}

// TestLacks: a recorded message is lacking when its recipient is a listed
// agent with an undamaged log (terminated or not) that has not had it, or
// USER (unless left out, or its inbox is not open yet) without it.
func TestLacks(t *testing.T) {
	held := newStopHeld()
	h := newHarness(t, withStopHeld(held), func(h *harness) { h.noWake = true })
	root := h.create("root", "", "echo")
	a := h.create("a", root, "echo")
	mustEnqueue(t, h, mailMsg(h, "m1", root, a, "hi"))
	mustEnqueue(t, h, mailMsg(h, "u2", root, tree.User, "hi"))
	leaf := createHeld(h, "leaf", root)
	bad := h.create("bad", root, "echo")
	mustEnqueue(t, h, mailMsg(h, "b1", root, bad, "hi"))
	type lacksCase struct {
		name       string
		s          sentRef
		agentsOnly bool
		want       bool
	}
	check := func(cases ...lacksCase) {
		t.Helper()
		for _, tc := range cases {
			if got := h.c.lacks(tc.s, tc.agentsOnly); got != tc.want {
				t.Errorf("%s: lacks = %v, want %v", tc.name, got, tc.want)
			}
		}
	}
	ref := func(id, to string) sentRef { return sentRef{ID: id, To: to} }
	check(
		lacksCase{"agent lacks it", ref("m0", a), true, true},
		lacksCase{"agent has it", ref("m1", a), false, false},
		lacksCase{"no agent", ref("m1", "x"), false, false},
		lacksCase{"USER lacks it", ref("u1", tree.User), false, true},
		lacksCase{"USER left out", ref("u1", tree.User), true, false},
		lacksCase{"USER has it", ref("u2", tree.User), false, false},
	)
	finish := terminating(t, h, held, leaf)
	check(lacksCase{"agent terminated", ref("m0", leaf), false, true})
	finish()
	check(lacksCase{"agent gone", ref("m0", leaf), false, false})
	damageLog(t, h, bad)
	check(lacksCase{"agent's log damaged", ref("m0", bad), false, false})

	// USER's inbox is not open before recovery opens it.
	c, err := NewCore(context.Background(), withDefaults(CoreOptions{FS: faultfs.NewMem(), Home: "/home", Logger: hclog.NewNullLogger(),
		Providers: map[string]provider.Provider{"inproc": inproc.New("inproc", inproc.Options{})}, DefaultModel: "echo"}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Abandon()
	if c.lacks(ref("u1", tree.User), false) {
		t.Error("USER not open: lacks = true, want false")
	}
}

// TestDelivered: the messages a turn took are marked delivered in one
// write to their agent's log; an agent that is not live is ErrNoAgent.
func TestDelivered(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.noWake = true })
	root := h.create("root", "", "echo")
	kid := h.create("kid", root, "echo")
	mustEnqueue(t, h, mailMsg(h, "m1", root, kid, "one"))
	mustEnqueue(t, h, mailMsg(h, "m2", root, kid, "two"))
	var err error
	writes := logWrites(h, kid, func() { err = h.c.markDelivered(kid, []string{"m1", "m2"}) })
	if err != nil {
		t.Fatal(err)
	}
	es := h.entries(kid)
	last := es[len(es)-2:]
	if writes != 1 || last[0].Event != schema.MessageDelivered || string(last[0].Data) != `{"message_id":"m1"}` ||
		last[1].Event != schema.MessageDelivered || string(last[1].Data) != `{"message_id":"m2"}` {
		t.Fatalf("%d writes ending the log with %s %s, %s %s; want message.delivered m1, m2 in one write",
			writes, last[0].Event, last[0].Data, last[1].Event, last[1].Data)
	}
	if n := pendingLen(mustAgent(t, h.c, kid)); n != 0 {
		t.Fatalf("%d messages pending after their delivery", n)
	}
	if err := h.c.markDelivered("x", []string{"m1"}); !errors.Is(err, errNotFoundAgent) {
		t.Fatalf("markDelivered for no agent: %v", err)
	}
}

// TestRefsDeliversWhatRecipientsLack: the messages a recipient lacks are
// read back from the sender's tool.call line and delivered; those it has,
// those to USER under agentsOnly, and those whose line cannot be read (no
// such seq, no such message in the line) are not.
func TestRefsDeliversWhatRecipientsLack(t *testing.T) {
	logs := &logBuffer{}
	h := newHarness(t, logInto(logs), func(h *harness) { h.noWake = true })
	s := h.create("s", "", "echo")
	a := h.create("a", s, "echo")
	b := h.create("b", s, "echo")
	m2 := mailMsg(h, "m2", s, b, "two")
	mustEnqueue(t, h, m2)
	refs := recordSent(t, h, s, mailMsg(h, "m1", s, a, "one"), m2, mailMsg(h, "m3", s, tree.User, "three"))
	refs = append(refs, sentRef{ID: "m4", To: a, Ref: inbox.Ref{Seq: 999}},
		sentRef{ID: "m5", To: a, Ref: refs[0].Ref, Index: 9})
	h.c.redeliverRefs(context.Background(), s, refs, true)
	ia, ib := mustAgent(t, h.c, a), mustAgent(t, h.c, b)
	got := func() string {
		var out []string
		for _, x := range []struct {
			id string
			r  *agent
		}{{a, ia}, {b, ib}} {
			ms, err := h.c.fillPayloads(context.Background(), x.id, pendingOf(x.r))
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range ms {
				out = append(out, m.ID+">"+m.Recipient+":"+m.Payload)
			}
		}
		for _, m := range h.c.UserPending(context.Background()) {
			out = append(out, m.ID+">"+m.Recipient+":"+m.Payload)
		}
		return strings.Join(out, " ")
	}
	if g := got(); g != "m1>"+a+":one m2>"+b+":two" {
		t.Fatalf("inboxes hold %q; want m1 delivered to a, m2 to b (once), nothing to USER", g)
	}
	// Recovery (agentsOnly) says which messages it found lacking: m1 only.
	if l := logs.String(); !strings.Contains(l, "never got: message=m1 ") || strings.Count(l, "never got:") != 1 {
		t.Fatalf("log %q; want the redelivery of m1 alone reported", l)
	}
	h.c.redeliverRefs(context.Background(), s, refs[2:3], false)
	if g := got(); g != "m1>"+a+":one m2>"+b+":two m3>USER:three" {
		t.Fatalf("without agentsOnly: inboxes hold %q; want m3 delivered to USER", g)
	}
	if n := len(enqueuedIDs(h, b)); n != 1 {
		t.Fatalf("b's log enqueued m2 %d times, want once", n)
	}
}
