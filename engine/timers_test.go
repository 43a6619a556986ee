package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/schedule"
	"github.com/warren-dev/warren/session"
)

var clockStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func withFakeClock(h *harness) { h.clock = schedule.NewFake(clockStart) }

func asker(timeout int) inproc.Program {
	return func(ctx context.Context, tr *inproc.Turn) (string, error) {
		r, err := tr.Call("await_input", map[string]any{"kind": "question", "prompt": "name?", "timeout": timeout})
		if err != nil {
			return "", err
		}
		return r["response"].(string), nil
	}
}

// reminderNotices counts the reminder notices in an agent's log whose text
// starts with "Reminder: "+reason.
func (h *harness) reminderNotices(id, reason string) int {
	n := 0
	for _, e := range h.entries(id) {
		if e.Event == "message.enqueued" && strings.HasPrefix(dataOf(h.t, e)["payload"].(string), "Reminder: "+reason) {
			n++
		}
	}
	return n
}

// TestWaitDeadlineFiresAtExactlyItsDeadline: on the fake clock the wait is
// live at its deadline and expired at the first instant after it (a token
// is overdue once the clock is past its deadline), by its deadline timer
// alone, logging run.interrupted (wait_timeout) then token.expired stamped
// with that instant (the log keeps milliseconds), the two records
// SweepWaits logs.
func TestWaitDeadlineFiresAtExactlyItsDeadline(t *testing.T) {
	h := newHarness(t, withFakeClock)
	h.prov.Register("asker", asker(60))
	id := h.create("lead", "", "asker")
	if res := h.send(id, "ask"); res.Status != "suspended" {
		t.Fatalf("send: %+v", res)
	}
	var runID, tokenID, deadline string
	for _, e := range h.entries(id) {
		if e.Event == "run.waiting" {
			d := dataOf(t, e)
			runID, tokenID, deadline = d["run_id"].(string), d["token_id"].(string), d["deadline"].(string)
		}
	}
	due := clockStart.Add(time.Minute)
	if deadline != due.Format(time.RFC3339Nano) {
		t.Fatalf("run.waiting deadline %s, want %s (the fake now + 60s)", deadline, due.Format(time.RFC3339Nano))
	}
	h.clock.Set(due)
	if n := h.count(id, "token.expired") + h.count(id, "run.interrupted"); n != 0 {
		t.Fatalf("the wait expired at its deadline (%d expiry entries); a token is in time at its deadline (token.Overdue)", n)
	}
	h.clock.Advance(time.Nanosecond)
	es := h.entries(id)
	if len(es) < 2 {
		t.Fatalf("log too short: %d entries", len(es))
	}
	got := es[len(es)-2:]
	want := []struct{ event, data string }{
		{"run.interrupted", fmt.Sprintf(`{"run_id":%q,"reason":"wait_timeout"}`, runID)},
		{"token.expired", fmt.Sprintf(`{"token_id":%q,"run_id":%q}`, tokenID, runID)},
	}
	for i, w := range want {
		if got[i].Event != w.event || string(got[i].Data) != w.data {
			t.Fatalf("entry %d = %s %s, want %s %s", i, got[i].Event, got[i].Data, w.event, w.data)
		}
		if at := due.Add(time.Nanosecond).Truncate(time.Millisecond); !got[i].TS.Equal(at) {
			t.Fatalf("%s stamped %v, want the fake instant after the deadline (to the log's millisecond) %v", got[i].Event, got[i].TS, at)
		}
	}
	if s := h.statusOf(id); s != "interrupted_waiting" {
		t.Fatalf("status after the deadline = %s, want interrupted_waiting", s)
	}
	h.clock.Advance(time.Hour)
	if n := h.count(id, "token.expired"); n != 1 {
		t.Fatalf("token.expired logged %d times, want 1", n)
	}
}

// TestOneShotReminderFiresOnce: a reminder without every fires at its due
// time, once, however far the clock moves after, and leaves no timer.
func TestOneShotReminderFiresOnce(t *testing.T) {
	h := newHarness(t, withFakeClock, func(h *harness) { h.noWake = true })
	root := h.create("root", "", "echo")
	h.tool(root, "remind_me", map[string]any{"reason": "once", "timeout": 60})
	h.clock.Advance(59 * time.Second)
	if n := h.reminderNotices(root, "once"); n != 0 {
		t.Fatalf("%d notices before the due time", n)
	}
	h.clock.Advance(time.Second)
	for i := 0; i < 5; i++ {
		h.clock.Advance(time.Hour)
	}
	if n := h.reminderNotices(root, "once"); n != 1 {
		t.Fatalf("a one-shot reminder fired %d times, want 1", n)
	}
	if n := h.c.sched.Pending(); n != 0 {
		t.Fatalf("%d timers armed after the one-shot fired, want 0", n)
	}
}

// TestCloseWaitsForAFiringReminder: Close that begins while a reminder's
// notice is being written (held in its fsync) returns cleanly with the
// notice in the log, once. (The log's own lock would also hold Close's
// log.Close behind the write; the tests that fail if Close stops waiting
// for callbacks are TestCloseWaitsForADeadlineSweepInProgress, whose sweep
// writes session.json after its log write, and the schedule package's
// TestCloseWaitsForARunningCallback.)
func TestCloseWaitsForAFiringReminder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hold := newHoldFS()
		defer hold.let()
		h := newHarness(t, withFakeClock, func(h *harness) {
			h.noWake = true
			h.wrapFS = func(fsys faultfs.FS) faultfs.FS { hold.FS = fsys; return hold }
		})
		root := h.create("root", "", "echo")
		h.tool(root, "remind_me", map[string]any{"reason": "held", "timeout": 60})
		hold.arm(root + "/events.jsonl")
		fired := make(chan struct{})
		go func() { h.clock.Advance(time.Minute); close(fired) }()
		<-hold.entered
		closed := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			closed <- h.c.Close(ctx)
		}()
		// Close stops the scheduler, then waits for the callback held in its
		// write: once every goroutine is blocked, it is there.
		synctest.Wait()
		if !h.c.sched.Stopped() {
			t.Fatal("Close is blocked, yet the scheduler is not stopped")
		}
		hold.let()
		if err := <-closed; err != nil {
			t.Fatalf("Close: %v", err)
		}
		<-fired
		if n := h.reminderNotices(root, "held"); n != 1 {
			t.Fatalf("the reminder that fired as Close began logged %d notices, want 1 (Close did not wait for it)", n)
		}
	})
}

// TestNothingFiresAfterClose: after Close, due deadlines, reminders, the
// at-rest checkpoint and the periodic sweep do nothing: no timer is left on the clock and moving it
// touches no file.
func TestNothingFiresAfterClose(t *testing.T) {
	h := newHarness(t, withFakeClock)
	h.prov.Register("asker", asker(60))
	id := h.create("lead", "", "asker")
	h.send(id, "ask")
	h.tool(id, "remind_me", map[string]any{"reason": "tick", "timeout": 10, "every": 10})
	h.c.SweepEvery(30 * time.Second)
	if n := h.c.sched.Pending(); n != 4 {
		t.Fatalf("%d timers armed, want 4 (deadline, reminder, sweep, the checkpoint of the agent at rest)", n)
	}
	if err := h.c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := h.clock.Pending(); n != 0 {
		t.Fatalf("%d timers (deadline, reminder, sweep, snapshot delays) still armed on the clock after Close", n)
	}
	ops := h.fs.MutatingOps()
	h.clock.Advance(24 * time.Hour)
	h.c.SweepWaits()
	h.c.SweepEvery(time.Second)
	h.clock.Advance(time.Hour)
	if n := h.fs.MutatingOps(); n != ops {
		t.Fatalf("%d filesystem operations after Close, want 0", n-ops)
	}
}

// TestSweepEveryExpiresRecoveredWaits: a wait recovered after a restart
// has no deadline timer of its own; the periodic sweep expires it at its
// first tick past the deadline.
func TestSweepEveryExpiresRecoveredWaits(t *testing.T) {
	h := newHarness(t, withFakeClock)
	h.prov.Register("asker", asker(60))
	id := h.create("lead", "", "asker")
	h.send(id, "ask")
	h.restart()
	h.c.SweepEvery(30 * time.Second)
	h.clock.Advance(60 * time.Second) // ticks at 30s and 60s: not past the deadline
	if n := h.count(id, "token.expired"); n != 0 {
		t.Fatalf("expired before the deadline passed (x%d)", n)
	}
	h.clock.Advance(30 * time.Second)
	if n := h.count(id, "token.expired"); n != 1 {
		t.Fatalf("token.expired x%d after the 90s tick, want 1", n)
	}
	if s := h.statusOf(id); s != "interrupted_waiting" {
		t.Fatalf("status = %s", s)
	}
}

// TestSessionSnapshotWrittenOnceAfterTheDelay: the snapshot writer waits
// SessionSaveDelay (an hour here) on the core's clock: nothing is written before it
// passes, then the latest state once, however many changes came meanwhile.
func TestSessionSnapshotWrittenOnceAfterTheDelay(t *testing.T) {
	h := newHarness(t, withFakeClock, func(h *harness) {
		h.saveDelay = time.Hour
		h.ckptEvery = -1 // no checkpoint timers: the writer's delay is the only timer on the clock
	})
	start := len(h.fs.Ops())
	id := h.create("a", "", "echo")
	for _, msg := range []string{"one", "two"} {
		if res := h.send(id, msg); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	h.clock.BlockUntil(1) // the writer sleeps on the clock
	h.clock.Advance(time.Hour - time.Millisecond)
	if n := sessionRenames(h.fs.Ops()[start:], id); n != 0 {
		t.Fatalf("session.json written %d times before the delay passed, want 0", n)
	}
	h.clock.Advance(time.Millisecond)
	h.c.snaps.Wait()
	if n := sessionRenames(h.fs.Ops()[start:], id); n != 1 {
		t.Fatalf("session.json written %d times after the delay, want 1 (the changes coalesced)", n)
	}
	s, err := session.NewStore(h.fs, "/home/agents").Load(id)
	if err != nil {
		t.Fatal(err)
	}
	if s.State != session.StateIdle || s.Run != nil {
		t.Fatalf("session.json: state %s run %+v, want idle with no run", s.State, s.Run)
	}
}

// TestRetryBackoffWaitsOnTheClock: with the default Sleep, a transient
// failure's backoff (logged in turn.retry) is waited on the core's clock:
// the retry comes when the clock has moved by the delay, not before.
func TestRetryBackoffWaitsOnTheClock(t *testing.T) {
	h := newHarness(t, withFakeClock, func(h *harness) {
		h.clockSleep = true
		h.saveDelay = -1 // the backoff is the only timer on the clock:
		h.ckptEvery = -1 // no session writer's delay, no checkpoint timer
		h.cfg.RetryBaseDelay = time.Second
	})
	h.prov.Register("flaky", inproc.FailTransient(1, 0, inproc.Echo))
	id := h.create("lead", "", "flaky")
	done := make(chan TurnResult, 1)
	go func() { done <- h.send(id, "x") }()
	h.clock.BlockUntil(1) // the turn sleeps its backoff on the clock
	if n := h.count(id, "turn.retry"); n != 1 {
		t.Fatalf("turn.retry x%d before the backoff, want 1", n)
	}
	h.clock.Advance(time.Second - time.Millisecond)
	select {
	case res := <-done:
		t.Fatalf("the turn retried before its 1s backoff passed on the clock: %+v", res)
	default:
	}
	h.clock.Advance(time.Millisecond)
	if res := <-done; res.Err != nil || res.Response != "echo: x" {
		t.Fatalf("result after the backoff = %+v", res)
	}
}
