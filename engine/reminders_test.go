package engine

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warren-dev/warren/engine/internal/notice"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/schedule"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/tree"
)

// An agent's reminders (reminders.go) through the real engine on the fake
// clock: what scheduling and cancelling log, when the timers fire, the
// notices they deliver, and the record's remMu held across a firing's and
// a cancel's writes. (These tests replace the former package reminders',
// which drove it through a recording fake.)

// reminderHarness has the fake clock, no wakes, and no timer on the
// scheduler or the clock but the reminders' (no checkpoint timers, no
// session writer's delay); a log whose write failed reopens on the next
// append.
func reminderHarness(t *testing.T, setup ...func(h *harness)) *harness {
	return newHarness(t, append([]func(*harness){withFakeClock, func(h *harness) {
		h.noWake, h.saveDelay, h.ckptEvery, h.healBackoff = true, -1, -1, -1
	}}, setup...)...)
}

// holding makes the harness's core write through hold (holdFS).
func holding(hold *holdFS) func(h *harness) {
	return func(h *harness) {
		h.wrapFS = func(fsys faultfs.FS) faultfs.FS { hold.FS = fsys; return hold }
	}
}

// nextTimer is when the only armed timer fires; ok is false when none is
// armed.
func nextTimer(t *testing.T, h *harness) (at time.Time, ok bool) {
	t.Helper()
	switch n := h.c.sched.Pending(); n {
	case 0:
		return time.Time{}, false
	case 1:
		at, _ := h.clock.Next()
		return at, true
	default:
		t.Fatalf("%d timers armed, want at most one", n)
		return time.Time{}, false
	}
}

// remMuHeld reports whether a's remMu is held (by someone else).
func remMuHeld(a *agent) bool {
	if a.remMu.TryLock() {
		a.remMu.Unlock()
		return false
	}
	return true
}

// TestScheduleLogsThenArms: scheduling logs reminder.scheduled, then arms
// the timer at the due time; a refused append arms nothing; an agent that
// is not live is ErrNoAgent. (That the timer is armed under the agent's
// lock is not observable: see TestArmNextTime.)
func TestScheduleLogsThenArms(t *testing.T) {
	h := reminderHarness(t)
	root := h.create("root", "", "echo")
	due := clockStart.Add(time.Hour)
	if err := h.c.scheduleReminder(root, reminder{ID: "r1", Reason: "why", Due: due, Every: 90 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if d := lastEntryData(h, root, schema.ReminderSched); d != `{"reminder_id":"r1","reason":"why","due":"2026-01-01T01:00:00Z","every_ms":90000}` {
		t.Fatalf("reminder.scheduled %s", d)
	}
	if at, ok := nextTimer(t, h); !ok || !at.Equal(due) {
		t.Fatalf("timer armed %v at %v, want at %v", ok, at, due)
	}
	h.clock.Set(due.Add(-time.Nanosecond))
	if n := h.reminderNotices(root, "why"); n != 0 {
		t.Fatalf("%d notices before the due time", n)
	}
	h.clock.Advance(time.Nanosecond)
	if n := h.reminderNotices(root, "why"); n != 1 {
		t.Fatalf("%d notices at the due time, want 1", n)
	}

	h.c.sched.CancelOwner(root)
	failNextLogWrite(h, root)
	err := h.c.scheduleReminder(root, reminder{ID: "r2", Reason: "refused", Due: h.clock.Now().Add(time.Minute)})
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("scheduleReminder = %v, want the append's error", err)
	}
	if _, ok := nextTimer(t, h); ok || h.count(root, schema.ReminderSched) != 1 {
		t.Fatalf("a refused schedule: timer armed %v, %d reminder.scheduled (want none armed, 1)", ok, h.count(root, schema.ReminderSched))
	}
	h.clock.Advance(time.Hour)
	if n := h.reminderNotices(root, "refused"); n != 0 {
		t.Fatalf("a refused reminder fired %d times", n)
	}

	if err := h.c.scheduleReminder("nobody", reminder{ID: "r3", Due: due}); !errors.Is(err, errNotFoundAgent) {
		t.Fatalf("scheduleReminder for no agent = %v", err)
	}
	if _, ok := nextTimer(t, h); ok {
		t.Fatal("a reminder for no agent was armed")
	}
}

// TestArmNextTime: a reminder is armed at its due time until it has
// fired (one that does not repeat is gone then); a repeating one that
// fired is armed one period after its last hit; an unknown one is not
// armed. (The former test also armed a reminder that does not repeat with
// a last hit; the fold drops such a reminder when it fires, so the real
// engine never has one. Nor does it show that the timer is armed under
// the agent's lock: no write or wake marks that moment.)
func TestArmNextTime(t *testing.T) {
	h := reminderHarness(t)
	root := h.create("root", "", "echo")
	a := mustAgent(t, h.c, root)
	for _, r := range []reminder{
		{ID: "once", Reason: "once", Due: clockStart.Add(2 * time.Hour)},
		{ID: "rep", Reason: "rep", Due: clockStart.Add(3 * time.Hour), Every: time.Hour},
		{ID: "hit", Reason: "hit", Due: clockStart.Add(time.Hour), Every: 5 * time.Hour},
	} {
		if err := h.c.scheduleReminder(root, r); err != nil {
			t.Fatal(err)
		}
	}
	h.clock.Advance(time.Hour) // "hit" fires
	if n := h.reminderNotices(root, "hit"); n != 1 {
		t.Fatalf("hit fired %d times, want 1", n)
	}
	armedAt := func(id string) (time.Time, bool) {
		h.c.sched.CancelOwner(root)
		h.c.armReminder(a, id)
		return nextTimer(t, h)
	}
	for _, c := range []struct {
		id string
		at time.Time
	}{
		{"once", clockStart.Add(2 * time.Hour)},
		{"rep", clockStart.Add(3 * time.Hour)},
		{"hit", clockStart.Add(6 * time.Hour)},
	} {
		if at, ok := armedAt(c.id); !ok || !at.Equal(c.at) {
			t.Errorf("%s armed %v at %v, want at %v", c.id, ok, at, c.at)
		}
	}
	if _, ok := armedAt("gone"); ok {
		t.Error("an unknown reminder was armed")
	}
	h.c.armReminder(a, "once")
	h.clock.Set(clockStart.Add(2 * time.Hour))
	if n := h.reminderNotices(root, "once"); n != 1 {
		t.Fatalf("once fired %d times, want 1", n)
	}
	if _, ok := armedAt("once"); ok {
		t.Error("a reminder that fired and does not repeat was armed again")
	}
}

// TestFireDeliversAndRearms: firing sends SYSTEM's notification (a fresh
// id, stamped with the clock's time in UTC), holds remMu while it does,
// and arms a repeating reminder again one period later; one that does not
// repeat is delivered and not armed again.
func TestFireDeliversAndRearms(t *testing.T) {
	hold := newHoldFS()
	defer hold.let()
	start := clockStart.In(time.FixedZone("X", 3600))
	h := reminderHarness(t, holding(hold), func(h *harness) { h.clock = schedule.NewFake(start) })
	root := h.create("root", "", "echo")
	a := mustAgent(t, h.c, root)
	due := clockStart.Add(time.Minute)
	if err := h.c.scheduleReminder(root, reminder{ID: "r1", Reason: "stand up", Due: due, Every: time.Hour}); err != nil {
		t.Fatal(err)
	}
	hold.arm(root + "/events.jsonl")
	fired := make(chan struct{})
	go func() { h.clock.Advance(time.Minute); close(fired) }()
	<-hold.entered
	if !remMuHeld(a) {
		t.Error("remMu was not held while the notice was enqueued")
	}
	hold.let()
	<-fired

	notices := func() []map[string]any {
		var out []map[string]any
		for _, e := range h.entries(root) {
			if e.Event == schema.MessageEnqueued {
				out = append(out, dataOf(t, e))
			}
		}
		return out
	}
	ns := notices()
	if len(ns) != 1 {
		t.Fatalf("%d notices, want 1", len(ns))
	}
	n := ns[0]
	md, _ := n["metadata"].(map[string]any)
	if n["message_id"] == "" || n["sender"] != tree.System || n["recipient"] != root || n["kind"] != string(inbox.KindNotification) ||
		n["payload"] != notice.Reminder("r1", "stand up", time.Hour) || n["timestamp"] != due.UTC().Format(inbox.TimestampFormat) ||
		len(md) != 1 || md["reminder_id"] != "r1" {
		t.Fatalf("notice %v\nwant from SYSTEM to root, a notification of r1 stamped %s (UTC)", n, due.UTC().Format(inbox.TimestampFormat))
	}
	if at, ok := nextTimer(t, h); !ok || !at.Equal(due.Add(time.Hour)) {
		t.Fatalf("after firing: armed %v at %v, want one period later", ok, at)
	}
	h.clock.Advance(time.Hour)
	if ns := notices(); len(ns) != 2 || ns[1]["message_id"] == ns[0]["message_id"] {
		t.Fatalf("second firing: notices %v; want a second one with its own id", ns)
	}

	// Once: delivered, not armed again.
	h.c.sched.CancelOwner(root)
	if err := h.c.scheduleReminder(root, reminder{ID: "r2", Reason: "once", Due: h.clock.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(time.Minute)
	if n := h.reminderNotices(root, "once"); n != 1 {
		t.Fatalf("once fired %d times, want 1", n)
	}
	if _, ok := nextTimer(t, h); ok {
		t.Fatal("a reminder that does not repeat was armed again")
	}
}

// TestFireSkipsAndFailures: a reminder unknown (cancelled, or fired and
// gone) and an agent terminated get nothing, not even a delivery that
// fails; a delivery that fails is logged and not armed again.
func TestFireSkipsAndFailures(t *testing.T) {
	logs := &logBuffer{}
	h := reminderHarness(t, logInto(logs), func(h *harness) { h.maxInbox = 1 })
	root := h.create("root", "", "echo")
	kid := h.create("kid", root, "echo")
	k := mustAgent(t, h.c, kid)
	h.c.fireReminder(k, "gone")
	if n := h.count(kid, schema.MessageEnqueued); n != 0 {
		t.Fatalf("an unknown reminder delivered %d notices", n)
	}

	mustEnqueue(t, h, mailMsg(h, "filler", root, kid, "x")) // kid's inbox is full
	if err := h.c.scheduleReminder(kid, reminder{ID: "r1", Reason: "full", Due: clockStart.Add(time.Minute), Every: time.Hour}); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(time.Minute)
	if n := h.reminderNotices(kid, "full"); n != 0 {
		t.Fatalf("%d notices to a full inbox", n)
	}
	if s := logs.String(); !strings.Contains(s, "[ERROR] delivering a reminder: agent="+kid+" reminder=r1 err=") {
		t.Fatalf("log %q", s)
	}
	if _, ok := nextTimer(t, h); ok {
		t.Fatal("a reminder whose delivery failed was armed again")
	}

	if err := h.c.Terminate(context.Background(), kid); err != nil {
		t.Fatal(err)
	}
	tries := strings.Count(logs.String(), "delivering a reminder")
	h.c.fireReminder(k, "r1") // a timer that fired as the agent terminated
	if n := strings.Count(logs.String(), "delivering a reminder"); n != tries || h.reminderNotices(kid, "full") != 0 {
		t.Fatalf("a terminated agent's reminder was delivered or tried (%d failures logged, want %d)", n, tries)
	}
	if _, ok := nextTimer(t, h); ok {
		t.Fatal("a terminated agent's reminder was armed")
	}
}

// TestCancel: cancelling logs reminder.cancelled with remMu held across
// the append (serialised with firing), then disarms; an unknown reminder
// or agent logs nothing; a refused append leaves the timer armed and says
// the reminder was known.
func TestCancel(t *testing.T) {
	hold := newHoldFS()
	defer hold.let()
	h := reminderHarness(t, holding(hold))
	root := h.create("root", "", "echo")
	a := mustAgent(t, h.c, root)
	if known, err := h.c.cancelReminder(root, "nope"); known || err != nil {
		t.Fatalf("cancelReminder(unknown) = %v, %v", known, err)
	}
	if known, err := h.c.cancelReminder("nobody", "r1"); known || err != nil {
		t.Fatalf("cancelReminder(no agent) = %v, %v", known, err)
	}
	if n := h.count(root, schema.ReminderCancel); n != 0 {
		t.Fatalf("%d reminder.cancelled for unknown reminders", n)
	}

	if err := h.c.scheduleReminder(root, reminder{ID: "r1", Reason: "cancelled", Due: clockStart.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	hold.arm(root + "/events.jsonl")
	type result struct {
		known bool
		err   error
	}
	done := make(chan result, 1)
	go func() {
		known, err := h.c.cancelReminder(root, "r1")
		done <- result{known, err}
	}()
	<-hold.entered
	if !remMuHeld(a) {
		t.Error("remMu was not held across the cancel's append")
	}
	hold.let()
	if r := <-done; !r.known || r.err != nil {
		t.Fatalf("cancelReminder = %v, %v", r.known, r.err)
	}
	if remMuHeld(a) {
		t.Fatal("cancelReminder left remMu held")
	}
	if d := lastEntryData(h, root, schema.ReminderCancel); d != `{"reminder_id":"r1"}` {
		t.Fatalf("reminder.cancelled %q", d)
	}
	if _, ok := nextTimer(t, h); ok {
		t.Fatal("a cancelled reminder is still armed")
	}
	h.clock.Advance(2 * time.Hour)
	if n := h.reminderNotices(root, "cancelled"); n != 0 {
		t.Fatalf("a cancelled reminder fired %d times", n)
	}

	due := h.clock.Now().Add(time.Hour)
	if err := h.c.scheduleReminder(root, reminder{ID: "r2", Reason: "kept", Due: due}); err != nil {
		t.Fatal(err)
	}
	failNextLogWrite(h, root)
	if known, err := h.c.cancelReminder(root, "r2"); !known || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("cancelReminder with a refused append = %v, %v; want known and the append's error", known, err)
	}
	if n := h.count(root, schema.ReminderCancel); n != 1 {
		t.Fatalf("%d reminder.cancelled, want only r1's", n)
	}
	if at, ok := nextTimer(t, h); !ok || !at.Equal(due) {
		t.Fatalf("after a refused cancel: armed %v at %v, want still armed at %v", ok, at, due)
	}
	h.clock.Set(due)
	if n := h.reminderNotices(root, "kept"); n != 1 {
		t.Fatalf("the reminder whose cancel was refused fired %d times, want 1", n)
	}
}
