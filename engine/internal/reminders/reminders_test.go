package reminders

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

// fake records every step a reminder takes against its agent ("a1").
type fake struct {
	calls      []string
	rems       map[string]projection.Reminder
	terminated bool
	locked     bool // inside WithReminder (the agent's lock)
	appendErr  error
	enqueueErr error
	timers     *Timers
	heldInSend bool // the Timers lock was held during Enqueue
	heldInApp  bool // ... during Append
	fire       func()
	sent       []inbox.Message
	log        *strings.Builder
}

func newFake() *fake {
	var b strings.Builder
	return &fake{rems: map[string]projection.Reminder{}, timers: &Timers{}, log: &b}
}

func (f *fake) rec(format string, args ...any) {
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
}

// held reports whether the Timers lock is held (TryLock fails).
func (f *fake) held() bool {
	if f.timers.mu.TryLock() {
		f.timers.mu.Unlock()
		return false
	}
	return true
}

// fakeAgent is agent id of the fake; its steps go to the fake's record.
type fakeAgent struct {
	f  *fake
	id string
}

func (f *fake) Agent(id string) (*fakeAgent, bool) { return f.agent(id), id == "a1" }
func (f *fake) agent(id string) *fakeAgent         { return &fakeAgent{f, id} }
func (a *fakeAgent) ID() string                    { return a.id }
func (a *fakeAgent) Timers() *Timers               { return a.f.timers }
func (a *fakeAgent) WithReminder(id string, fn func(projection.Reminder)) {
	f := a.f
	f.rec("read %s", id)
	if r, ok := f.rems[id]; ok {
		f.locked = true
		fn(r)
		f.locked = false
	}
}
func (a *fakeAgent) Terminated() bool { a.f.rec("terminated?"); return a.f.terminated }
func (a *fakeAgent) Append(event string, data any) (eventlog.Entry, error) {
	f := a.f
	f.heldInApp = f.held()
	f.rec("append %s %+v", event, data)
	return eventlog.Entry{}, f.appendErr
}
func (f *fake) Arm(a *fakeAgent, name string, t time.Time, fire func()) {
	f.rec("arm %s %s locked=%v", name, t.Format(time.RFC3339), f.locked)
	f.fire = fire
}
func (f *fake) Disarm(a *fakeAgent, name string) { f.rec("disarm %s", name) }
func (f *fake) Now() time.Time                   { f.rec("now"); return t0.Add(time.Hour).In(time.FixedZone("X", 3600)) }
func (f *fake) NewID() string                    { f.rec("newid"); return "m1" }
func (f *fake) Enqueue(m inbox.Message) error {
	f.heldInSend = f.held()
	f.rec("enqueue %s", m.ID)
	f.sent = append(f.sent, m)
	return f.enqueueErr
}
func (f *fake) Logger() hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Output: f.log, DisableTime: true})
}

func (f *fake) want(t *testing.T, want ...string) {
	t.Helper()
	if !reflect.DeepEqual(f.calls, want) {
		t.Fatalf("steps:\n  %s\nwant:\n  %s", strings.Join(f.calls, "\n  "), strings.Join(want, "\n  "))
	}
	f.calls = nil
}

// Scheduling logs reminder.scheduled, then arms the timer at the due
// time, under the agent's lock; a refused append arms nothing.
func TestScheduleLogsThenArms(t *testing.T) {
	f := newFake()
	f.rems["r1"] = projection.Reminder{ID: "r1", Due: t0}
	err := Schedule[*fakeAgent](f, "a1", toolexec.Reminder{ID: "r1", Reason: "why", Due: t0, Every: 90 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	f.want(t, "append reminder.scheduled {ReminderID:r1 Reason:why Due:2026-01-02T03:04:05Z EveryMS:90000}",
		"read r1", "arm reminder:r1 2026-01-02T03:04:05Z locked=true")

	f.appendErr = errors.New("disk full")
	if err := Schedule[*fakeAgent](f, "a1", toolexec.Reminder{ID: "r1", Due: t0}); !errors.Is(err, f.appendErr) {
		t.Fatalf("Schedule = %v, want the append's error", err)
	}
	f.want(t, "append reminder.scheduled {ReminderID:r1 Reason: Due:2026-01-02T03:04:05Z EveryMS:0}")

	if err := Schedule[*fakeAgent](f, "nobody", toolexec.Reminder{ID: "r1", Due: t0}); !errors.Is(err, toolexec.ErrNoAgent) {
		t.Fatalf("Schedule for no agent = %v", err)
	}
	f.want(t)
}

// A reminder is armed at its due time until it has fired; a repeating
// one that fired is armed one period after its last hit; an unknown one
// is not armed.
func TestArmNextTime(t *testing.T) {
	f := newFake()
	f.rems["once"] = projection.Reminder{ID: "once", Due: t0, LastHit: t0.Add(time.Minute)}
	f.rems["rep"] = projection.Reminder{ID: "rep", Due: t0, Every: time.Hour}
	f.rems["hit"] = projection.Reminder{ID: "hit", Due: t0, Every: time.Hour, LastHit: t0.Add(5 * time.Hour)}
	for _, id := range []string{"once", "rep", "hit", "gone"} {
		Arm[*fakeAgent](f, f.agent("a1"), id)
	}
	f.want(t, "read once", "arm reminder:once 2026-01-02T03:04:05Z locked=true",
		"read rep", "arm reminder:rep 2026-01-02T03:04:05Z locked=true",
		"read hit", "arm reminder:hit 2026-01-02T09:04:05Z locked=true",
		"read gone")
}

// Firing sends SYSTEM's notification (a fresh id, then the clock), holds
// the Timers lock while it does, and arms a repeating reminder again.
func TestFireDeliversAndRearms(t *testing.T) {
	f := newFake()
	f.rems["r1"] = projection.Reminder{ID: "r1", Reason: "stand up", Due: t0, Every: time.Hour}
	Arm[*fakeAgent](f, f.agent("a1"), "r1")
	f.calls = nil
	f.fire()
	f.want(t, "read r1", "terminated?", "newid", "now", "enqueue m1",
		"read r1", "arm reminder:r1 2026-01-02T03:04:05Z locked=true")
	if !f.heldInSend {
		t.Fatal("the Timers lock was not held while the notice was enqueued")
	}
	want := inbox.Message{ID: "m1", Sender: tree.System, Recipient: "a1", Kind: inbox.KindNotification,
		Payload: notice.Reminder("r1", "stand up", time.Hour), Timestamp: t0.Add(time.Hour),
		Metadata: map[string]string{"reminder_id": "r1"}}
	if got := f.sent[0]; !reflect.DeepEqual(got, want) || got.Timestamp.Location() != time.UTC {
		t.Fatalf("notice %+v\nwant %+v (UTC)", got, want)
	}

	// Once: delivered, not armed again.
	f.rems["r1"] = projection.Reminder{ID: "r1", Reason: "once", Due: t0}
	Fire[*fakeAgent](f, f.agent("a1"), "r1")
	f.want(t, "read r1", "terminated?", "newid", "now", "enqueue m1")
}

// A reminder cancelled (or fired and gone) and an agent terminated get
// nothing; a delivery that fails is logged and not armed again.
func TestFireSkipsAndFailures(t *testing.T) {
	f := newFake()
	Fire[*fakeAgent](f, f.agent("a1"), "gone")
	f.want(t, "read gone")

	f.rems["r1"] = projection.Reminder{ID: "r1", Due: t0, Every: time.Hour}
	f.terminated = true
	Fire[*fakeAgent](f, f.agent("a1"), "r1")
	f.want(t, "read r1", "terminated?")

	f.terminated = false
	f.enqueueErr = errors.New("inbox full")
	Fire[*fakeAgent](f, f.agent("a1"), "r1")
	f.want(t, "read r1", "terminated?", "newid", "now", "enqueue m1")
	if got := f.log.String(); !strings.Contains(got, "[ERROR] delivering a reminder: agent=a1 reminder=r1 err=\"inbox full\"") {
		t.Fatalf("log %q", got)
	}
}

// Cancelling logs reminder.cancelled under the Timers lock (serialised
// with firing), then disarms; an unknown reminder logs nothing; a refused
// append leaves the timer armed and says the reminder was known.
func TestCancel(t *testing.T) {
	f := newFake()
	if known, err := Cancel[*fakeAgent](f, "a1", "nope"); known || err != nil {
		t.Fatalf("Cancel(unknown) = %v, %v", known, err)
	}
	if known, err := Cancel[*fakeAgent](f, "nobody", "r1"); known || err != nil {
		t.Fatalf("Cancel(no agent) = %v, %v", known, err)
	}
	f.want(t, "read nope")

	f.rems["r1"] = projection.Reminder{ID: "r1", Due: t0}
	if known, err := Cancel[*fakeAgent](f, "a1", "r1"); !known || err != nil {
		t.Fatalf("Cancel = %v, %v", known, err)
	}
	f.want(t, "read r1", "append reminder.cancelled {ReminderID:r1 Reason: Due: EveryMS:0}", "disarm reminder:r1")
	if !f.heldInApp {
		t.Fatal("the Timers lock was not held across the cancel's append")
	}
	if f.held() {
		t.Fatal("Cancel left the Timers lock held")
	}

	f.appendErr = errors.New("disk full")
	if known, err := Cancel[*fakeAgent](f, "a1", "r1"); !known || !errors.Is(err, f.appendErr) {
		t.Fatalf("Cancel = %v, %v; want known and the append's error", known, err)
	}
	f.want(t, "read r1", "append reminder.cancelled {ReminderID:r1 Reason: Due: EveryMS:0}")
}
