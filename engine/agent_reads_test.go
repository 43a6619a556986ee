package engine

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/warren-dev/warren/engine/internal/placement"
	"github.com/warren-dev/warren/eventlog"
	fold "github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/session"
)

// What the tools and the turn read of an agent: its view with its state,
// the pending messages and those the running turn was shown, the calls
// and the answer its log records for a run, its metadata, what a child
// inherits and what a reopened session needs.
func TestReadsForToolsAndTurns(t *testing.T) {
	a, _ := newRec(t)
	logs(t, a, schema.SessionCreated, schema.SessionCreatedData{Provider: "prov", Model: "mod", Handle: "h1"})
	v := "x"
	logs(t, a, schema.MetadataUpdated, schema.MetadataUpdatedData{Key: "k", Value: &v})
	enqueue(t, a, "m1")
	enqueue(t, a, "m2")
	noErr(t, a.Claim())
	a.StartTurn(TurnRequest{Prompt: "go"}, func(error) {}, func(string) string { return "" }, func() string { return "r1" })
	logs(t, a, schema.TurnStart, schema.TurnStartData{RunID: "r1", Turn: 1, BootID: "b", Prompt: "go", MessageIDs: []string{"m1"}})
	logs(t, a, schema.ToolCall, schema.ToolCallData{CallID: "c1", Tool: "check_inbox", Result: map[string]any{"n": 1},
		RunID: "r1", Turn: 1})
	wait(t, a, "r1")
	logs(t, a, schema.RunResumed, schema.RunResumedData{RunID: "r1", TokenID: "tok", Response: "yes"})

	tv := a.ToolView()
	if tv.ID != "a1" || tv.Name != "worker" || tv.ParentID != "p1" || tv.State != schema.StateBusy || !tv.Busy ||
		tv.Pending != 2 || tv.Metadata["k"] != "x" {
		t.Fatalf("ToolView = %+v", tv)
	}
	tv.Metadata["k"] = "changed"
	if got, _ := a.Metadata("k"); got != "x" {
		t.Fatal("ToolView's metadata is not a copy")
	}
	pending, shown := a.Pending()
	if len(pending) != 2 || len(shown) != 1 || shown[0] != "m1" {
		t.Fatalf("Pending = %d messages, shown %v", len(pending), shown)
	}
	if first := a.PendingFirst(1, 0); len(first) != 1 || first[0].ID != "m1" {
		t.Fatalf("PendingFirst = %v", first)
	}
	calls, resume := a.Recorded("r1")
	if len(calls) != 1 || calls[0].Tool != "check_inbox" || resume == nil || resume["response"] != "yes" {
		t.Fatalf("Recorded = %+v, %v", calls, resume)
	}
	if calls, resume := a.Recorded("other"); calls != nil || resume != nil {
		t.Fatal("a run the log does not have has records")
	}
	if in := a.Inherit(); in.Provider != "prov" || in.Model != "mod" {
		t.Fatalf("Inherit = %+v", in)
	}
	if r := a.ReopenSettings(); r.Handle != "h1" || r.Provider != "prov" || r.Model != "mod" {
		t.Fatalf("ReopenSettings = %+v", r)
	}
	if k := a.TransitionKey(); k != "r1/1" {
		t.Fatalf("TransitionKey = %q", k)
	}
}

// What the mail reads: whether a message id was enqueued, the room for a
// reservation (the reservation's view runs against the agent's ids), and
// what a parent is told of a failed turn.
func TestReadsForMail(t *testing.T) {
	a, _ := newRec(t)
	enqueue(t, a, "m1")
	if has, terminated, corrupt := a.Inbox("m1"); !has || terminated || corrupt {
		t.Fatalf("Inbox(m1) = %v %v %v", has, terminated, corrupt)
	}
	if has, _, _ := a.Inbox("m2"); has {
		t.Fatal("m2 was never enqueued")
	}
	n, b, rn, rb := a.Room(func(has func(string) bool) (int, int64) {
		if has("m1") && !has("m9") {
			return 1, 7
		}
		return 0, 0
	})
	if n != 1 || b != int64(len("hi m1")) || rn != 1 || rb != 7 {
		t.Fatalf("Room = %d %d %d %d", n, b, rn, rb)
	}
	startRun(t, a, "r1")
	logs(t, a, schema.TurnFailed, schema.TurnFailedData{RunID: "r1", Error: "boom"})
	f := a.Failed(5)
	if f.ID != "a1" || f.Parent != "p1" || f.Name != "worker" || f.LastErr != "boom" || f.Total != 1 || len(f.Pending) != 1 {
		t.Fatalf("Failed = %+v", f)
	}
	a.MarkCorrupt(errors.New("bad"))
	if _, _, corrupt := a.Inbox("m1"); !corrupt {
		t.Fatal("a damaged log is not seen")
	}
}

// Subscriptions and reminders are read under the lock; a reminder's
// callback sees it, an unknown one calls nothing.
func TestReadsForSubsAndReminders(t *testing.T) {
	a, _ := newRec(t)
	logs(t, a, schema.ToolSubscribe, schema.SubscribeData{SubscriptionID: "s1", TargetID: "b", From: "busy", To: "idle"})
	if sub, ok := a.Subscription("s1"); !ok || sub.Target != "b" {
		t.Fatalf("Subscription = %+v %v", sub, ok)
	}
	logs(t, a, schema.ReminderSched, schema.ReminderData{ReminderID: "r1", Reason: "why",
		Due: time.Unix(50, 0).UTC().Format(time.RFC3339Nano)})
	var got []string
	a.WithReminder("r1", func(r fold.Reminder) { got = append(got, r.Reason) })
	a.WithReminder("nope", func(fold.Reminder) { got = append(got, "nope") })
	if len(got) != 1 || got[0] != "why" {
		t.Fatalf("WithReminder saw %v", got)
	}
	if ids, pending := a.Reminders(); len(ids) != 1 || ids[0] != "r1" || pending != 0 {
		t.Fatalf("Reminders = %v, %d", ids, pending)
	}
}

// An owed run end shows in Degraded until WriteOwed logs it, once.
func TestOwedEnd(t *testing.T) {
	a, lg := newRec(t)
	if a.Owed() || a.Degraded() != "" {
		t.Fatal("owed from the start")
	}
	startRun(t, a, "r1")
	a.Owe("r1", schema.TurnCancelled, schema.TurnCancelledData{RunID: "r1"}, errors.New("disk full"))
	if !a.Owed() || !strings.Contains(a.Degraded(), "turn.cancelled") {
		t.Fatalf("owed: %v, degraded %q", a.Owed(), a.Degraded())
	}
	if run, event, cause, ok := a.OwedEnd(); !ok || run != "r1" || event != schema.TurnCancelled || cause == nil {
		t.Fatalf("OwedEnd = %q %q %v %v", run, event, cause, ok)
	}
	if err := a.OwedErr(); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "r1") ||
		!strings.Contains(err.Error(), "turn.cancelled could not be logged (disk full)") {
		t.Fatalf("OwedErr = %v, want unavailable naming the run, the event and the cause", err)
	}
	before, written := lg.seq, 0
	owes := func() []eventlog.Record {
		return []eventlog.Record{{Event: schema.NoticesOwed, Data: schema.NoticesOwedData{From: "busy", To: "idle",
			Key: a.TransitionKey(), Subscriptions: []schema.NoticeOwed{{SubscriptionID: "s1", Subscriber: "w"}}}}}
	}
	noErr(t, a.WriteOwed(owes, func(runID, event string, logged bool) { written++ }))
	noErr(t, a.WriteOwed(owes, func(runID, event string, logged bool) { written++ }))
	if lg.seq != before+2 || written != 1 || a.Owed() || a.OwedErr() != nil {
		t.Fatalf("wrote %d entries (want the end and its notices), %d aftermaths; owed %v (%v)", lg.seq-before, written, a.Owed(), a.OwedErr())
	}
	// The notices the end owes are taken once.
	ns := a.TakeNotices()
	if len(ns) != 1 || ns[0].Seq != lg.seq || ns[0].From != "busy" || ns[0].To != "idle" || len(ns[0].Subscriptions) != 1 || ns[0].Subscriptions[0].Subscriber != "w" {
		t.Fatalf("TakeNotices = %+v", ns)
	}
	if again := a.TakeNotices(); again != nil {
		t.Fatalf("the same notices were taken twice: %+v", again)
	}
}

// Notices logged one after the other are all taken, in order, even when
// a later transition was logged before the earlier one's were delivered;
// a record rebuilt from its log (recovery) takes the latest, once.
func TestTakeNotices(t *testing.T) {
	a, lg := newRec(t)
	owe := func(from, to string) {
		logs(t, a, schema.NoticesOwed, schema.NoticesOwedData{From: from, To: to, Key: "r1/1",
			Subscriptions: []schema.NoticeOwed{{SubscriptionID: "s1", Subscriber: "w"}}})
	}
	if ns := a.TakeNotices(); ns != nil {
		t.Fatalf("notices before any transition: %+v", ns)
	}
	owe("busy", "waiting")
	owe("waiting", "idle")
	ns := a.TakeNotices()
	if len(ns) != 2 || ns[0].To != "waiting" || ns[1].To != "idle" || ns[1].Seq != lg.seq {
		t.Fatalf("TakeNotices = %+v; want both, in order", ns)
	}
	if ns := a.TakeNotices(); ns != nil {
		t.Fatalf("taken again: %+v", ns)
	}

	rebuilt := newAgent("a1", lg, a.p) // as recovery makes it: nothing logged by this process
	ns = rebuilt.TakeNotices()
	if len(ns) != 1 || ns[0].To != "idle" {
		t.Fatalf("a rebuilt record takes %+v; want the latest", ns)
	}
	if ns := rebuilt.TakeNotices(); ns != nil {
		t.Fatalf("a rebuilt record took the latest twice: %+v", ns)
	}
}

// What the views and the waits read: the snapshot with its flags, the
// derived status, the wait a run suspended on with its secret handed out
// once, and the latest resume.
func TestReadsForViewsAndWaits(t *testing.T) {
	a, _ := newRec(t)
	a.Snap.Set(&session.Session{State: session.StateIdle})
	startRun(t, a, "r1")
	a.Resumes().Mint("r1", "secret")
	wait(t, a, "r1")
	s := a.Snapshot("root/worker")
	if s.ID != "a1" || s.Path != "root/worker" || s.Name != "worker" || s.Wait == nil || s.Wait.TokenID != "tok" {
		t.Fatalf("Snapshot = %+v", s)
	}
	if st := a.Status("boot", time.Unix(10, 0)); st == "" {
		t.Fatal("no status")
	}
	w, secret := a.Suspended("r1")
	if w == nil || w.TokenID != "tok" || secret != "secret" {
		t.Fatalf("Suspended = %+v %q", w, secret)
	}
	if _, again := a.Suspended("r1"); again != "" {
		t.Fatal("the secret was handed out twice")
	}
	if _, ok := a.LastResume(); ok {
		t.Fatal("a resume before any")
	}
	logs(t, a, schema.TokenConsumed, schema.TokenData{TokenID: "tok", RunID: "r1"})
	logs(t, a, schema.RunResumed, schema.RunResumedData{RunID: "r1", TokenID: "tok", Response: "yes"})
	if lr, ok := a.LastResume(); !ok || lr.TokenID != "tok" {
		t.Fatalf("LastResume = %+v %v", lr, ok)
	}
	if st := a.WaitState(); st.LiveWait || st.Run.RunID != "r1" {
		t.Fatalf("WaitState = %+v", st)
	}
	if gi := a.GoneInfo(time.Unix(20, 0)); gi.Provider != "prov" || gi.LastTurnAt.IsZero() {
		t.Fatalf("GoneInfo = %+v", gi)
	}
}

// Recovery's reads: a child with no turn yet needs its bootstrap turn; an
// open run started in another boot needs the restart mark.
func TestReadsForRecovery(t *testing.T) {
	a, _ := newRec(t)
	if !a.NeedsBootstrap() {
		t.Fatal("a child with no turn does not need its bootstrap turn")
	}
	startRun(t, a, "r1")
	if a.NeedsBootstrap() {
		t.Fatal("a child that took a turn needs a bootstrap turn")
	}
	b := newAgent("b1", &fakeLog{}, newProjection())
	b.Log.(*fakeLog).a = b
	logs(t, b, schema.AgentCreated, schema.AgentCreatedData{AgentID: "b1", Name: "made", ParentID: ptr("p1"), Provider: "prov", Model: "mod"})
	if b.NeedsBootstrap() {
		t.Fatal("a child the operator created (no bootstrap in agent.created) needs a bootstrap turn")
	}
	if a.CutSpawns(placement.Existing{}) != nil {
		t.Fatal("cut spawns without any spawn")
	}
	// r1 started in boot "b": open in another start, it must be marked
	// interrupted; in its own start it is running.
	if !a.NeedsRestartMark("boot") || a.NeedsRestartMark("b") {
		t.Fatal("the restart mark does not follow the run's boot")
	}
}

// Pending's shown ids are those of the open run whether or not a turn of
// this process runs it: a run a crash interrupted (or that waits) keeps
// the messages its turn.start took, for its re-run to consume, so
// check_inbox must not deliver them meanwhile (the wake crash fuzzer's
// "both delivered by check_inbox and consumed by a completed turn",
// seed 1795572090641464222). Once the run ends, or a new run replaces
// it, nothing is held.
func TestPendingHoldsTheOpenRunsMessagesWithoutATurn(t *testing.T) {
	a, _ := newRec(t)
	enqueue(t, a, "m1")
	enqueue(t, a, "m2")
	logs(t, a, schema.TurnStart, schema.TurnStartData{RunID: "r1", Turn: 1, BootID: "b", Prompt: "go", MessageIDs: []string{"m1"}})
	logs(t, a, schema.RunInterrupted, schema.RunInterruptedData{RunID: "r1", Reason: "daemon_restart"})
	pending, shown := a.Pending()
	if len(pending) != 2 || !slices.Equal(shown, []string{"m1"}) {
		t.Fatalf("interrupted run: Pending = %d messages, shown %v; want 2, [m1]", len(pending), shown)
	}
	logs(t, a, schema.TurnStart, schema.TurnStartData{RunID: "r2", Turn: 1, BootID: "b", Prompt: "new", MessageIDs: []string{"m2"}})
	if _, shown := a.Pending(); !slices.Equal(shown, []string{"m2"}) {
		t.Fatalf("a new run replaced the interrupted one: shown %v; want [m2]", shown)
	}
	logs(t, a, schema.TurnComplete, schema.TurnCompleteData{RunID: "r2", Response: "done"})
	pending, shown = a.Pending()
	if len(pending) != 1 || pending[0].ID != "m1" || len(shown) != 0 {
		t.Fatalf("after the run completed: Pending = %v, shown %v; want m1 alone, nothing held", pending, shown)
	}
}

// The status of an agent without an open run comes from its log alone:
// listing it does not read the session.json a recovery left to read (the
// loader does not run), and a snapshot that says terminated while the log
// does not is not believed. With an open run the snapshot is read, and
// counts.
func TestStatusReadsSessionJSONOnlyForAnOpenRun(t *testing.T) {
	a, _ := newRec(t)
	loads := 0
	a.Snap.Defer(func() *session.Session {
		loads++
		return &session.Session{ID: "a1", State: session.StateTerminated}
	})
	now := time.Unix(100, 0)
	if st := a.Status("b", now); st != "idle" || loads != 0 {
		t.Fatalf("no run: status %q after %d loads; want idle from the log, no load", st, loads)
	}
	if v := buildView(a.Snapshot("/worker"), "b", now); v.Status != "idle" || loads != 0 {
		t.Fatalf("no run: view status %q after %d loads; want idle, no load", v.Status, loads)
	}
	startRun(t, a, "r1")
	if st := a.Status("b", now); st != "terminated" || loads != 1 {
		t.Fatalf("open run: status %q after %d loads; want the snapshot read once and counted (terminated)", st, loads)
	}
	logs(t, a, schema.TurnComplete, schema.TurnCompleteData{RunID: "r1", Response: "done"})
	if st := a.Status("b", now); st != "idle" {
		t.Fatalf("ended run: status %q; want idle from the log", st)
	}
}
