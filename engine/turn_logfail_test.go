package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/session"
	"github.com/warren-dev/warren/store"
	"github.com/warren-dev/warren/store/local"
)

// A turn whose log refuses an append (ENOSPC, EROFS, a cluster that did
// not answer): what is written, what is owed, and what the caller is told
// (turn.go's ends, owed.go).

// A run whose end is owed (its log refused it) and a log that still
// refuses appends: the next turn does not start, with code 6 and the log's
// error.
func TestOwedEndNotWrittenStartsNoTurn(t *testing.T) {
	h := newHarness(t, healAtOnce)
	var id string
	h.prov.Register("doomed", inproc.Sequence(func(context.Context, *inproc.Turn) (string, error) {
		failLog(h, id)
		return "ok", nil
	}, inproc.Reply("next")))
	id = h.create("a", "", "doomed")
	if res := h.send(id, "one"); res.Err == nil {
		t.Fatalf("setup: the turn completed although its log refused turn.complete: %+v", res)
	}
	a := mustAgent(t, h.c, id)
	if !a.Owed() {
		t.Fatal("setup: no run end owed")
	}
	before := h.events(id)
	h.c.snaps.Wait()
	ops := len(h.fs.Ops())
	res, err := h.c.Send(context.Background(), id, "two", "", "", nil)
	if err != nil || !errors.Is(res.Err, ErrUnavailable) || !errors.Is(res.Err, eventlog.ErrPoisoned) ||
		!strings.HasPrefix(res.Err.Error(), "agent "+id+" cannot start a turn: ") {
		t.Fatalf("result %+v, %v; want code 6 saying the agent cannot start a turn, wrapping the log's error", res, err)
	}
	wantNoTurn(t, h, a, before, ops)
	if n := h.prov.Calls("doomed"); n != 1 {
		t.Errorf("the provider was called %d times; want once (the first turn)", n)
	}
}

func TestTurnStartNotLoggedStartsNoTurn(t *testing.T) {
	// The local log's write fails (a full disk): the handle is poisoned,
	// so the error is a refusal (code 6) wrapping the disk's.
	t.Run("disk full", func(t *testing.T) {
		h := newHarness(t, healAtOnce)
		id := h.create("a", "", "echo")
		a := mustAgent(t, h.c, id)
		before := h.events(id)
		h.c.snaps.Wait()
		ops := len(h.fs.Ops())
		h.fs.Inject(faultfs.Rule{Kind: faultfs.OpWrite, Path: id + "/events.pending", Err: syscall.ENOSPC})
		res, err := h.c.Send(context.Background(), id, "hi", "", "", nil)
		if err != nil || !errors.Is(res.Err, syscall.ENOSPC) || !errors.Is(res.Err, ErrUnavailable) ||
			!strings.HasPrefix(res.Err.Error(), "logging turn.start for agent "+id+": eventlog: ") {
			t.Fatalf("result %+v, %v; want the log's error, a refusal", res, err)
		}
		wantNoTurn(t, h, a, before, ops)
		if n := h.prov.Calls("echo"); n != 0 {
			t.Errorf("the provider was called %d times; want never", n)
		}
	})
	// A store's append error that does not poison its log (a record it
	// will not take) is the caller's as it is, not a refusal.
	t.Run("not poisoned", func(t *testing.T) {
		var st *refuseStore
		h := newHarness(t, func(h *harness) {
			h.saveDelay = -1
			h.store = func(fsys faultfs.FS) store.Store {
				st = &refuseStore{Store: local.New(local.Options{FS: fsys, Home: "/home"})}
				return st
			}
		})
		id := h.create("a", "", "echo")
		a := mustAgent(t, h.c, id)
		before := h.events(id)
		h.c.snaps.Wait()
		ops := len(h.fs.Ops())
		tooBig := fmt.Errorf("record 0: %w: event %q is over the store's message size", eventlog.ErrInvalidRecord, schema.TurnStart)
		st.refuse(schema.TurnStart, tooBig)
		res, err := h.c.Send(context.Background(), id, "hi", "", "", nil)
		if err != nil || !errors.Is(res.Err, tooBig) || errors.Is(res.Err, ErrUnavailable) ||
			res.Err.Error() != "logging turn.start for agent "+id+": "+tooBig.Error() {
			t.Fatalf("result %+v, %v; want the log's error, as it is (not poisoned: not a refusal)", res, err)
		}
		wantNoTurn(t, h, a, before, ops)
	})
}

// A turn.complete the log refuses: the run ends as failed, owed until the
// log takes it; the caller gets code 6 and no response; session.json
// keeps the run, no transition, the agent not held, the parent not told.
func TestCompleteNotLoggedIsOwedAsFailed(t *testing.T) {
	h := newHarness(t, healAtOnce)
	var id string
	h.prov.Register("doomed", inproc.Sequence(func(context.Context, *inproc.Turn) (string, error) {
		failLog(h, id)
		return "ok", nil
	}, inproc.Reply("next")))
	boss := h.create("boss", "", "echo")
	id = h.create("kid", boss, "doomed")
	res, err := h.c.Send(context.Background(), id, "hi", "", "", nil)
	if err != nil || !errors.Is(res.Err, ErrUnavailable) || !errors.Is(res.Err, eventlog.ErrPoisoned) ||
		!strings.HasPrefix(res.Err.Error(), "logging turn.complete for agent "+id+": eventlog: ") {
		t.Fatalf("result %+v, %v; want code 6 saying turn.complete could not be logged", res, err)
	}
	if res.Response != "" || res.Status != "" {
		t.Errorf("result %+v; want no response and no status", res)
	}
	a := mustAgent(t, h.c, id)
	if run, event, cause, ok := a.OwedEnd(); !ok || run != res.RunID || event != schema.TurnFailed || !errors.Is(cause, syscall.ENOSPC) {
		t.Fatalf("owed %v %s %s (%v); want turn.failed of run %s, for the log's error", ok, run, event, cause, res.RunID)
	}
	if s := h.sessionJSON(id); s.State != session.StateRunning || s.Run == nil || s.Run.RunID != res.RunID {
		t.Errorf("session.json %s %+v; want it still running the run (no save)", s.State, s.Run)
	}
	if heldOf(a) || failureNotices(h, boss, id) != 0 {
		t.Errorf("held %v, parent's failure notices %d; want neither", heldOf(a), failureNotices(h, boss, id))
	}
	h.fs.ClearRules()
	if next := h.send(id, "again"); next.Response != "next" {
		t.Fatalf("the turn after the log healed: %+v", next)
	}
	if got := turnEvents(h, id); fmt.Sprint(got) != fmt.Sprint([]string{schema.TurnStart, schema.TurnFailed, schema.TurnStart, schema.TurnComplete}) {
		t.Fatalf("turn entries %v; want the owed turn.failed before the next turn", got)
	}
	var fd schema.TurnFailedData
	firstOf(h, id, schema.TurnFailed, &fd)
	if fd.RunID != res.RunID || !strings.HasPrefix(fd.Error, "the turn's result could not be logged: ") ||
		!strings.Contains(fd.Error, syscall.ENOSPC.Error()) {
		t.Errorf("the owed turn.failed %+v; want run %s, naming the log's error", fd, res.RunID)
	}
}

// A turn.failed the log refuses is owed; the caller gets the turn's own
// error; as for any end not logged, session.json keeps the run, the agent
// is not held and the parent not told.
func TestFailedEndNotLoggedIsOwed(t *testing.T) {
	h := newHarness(t, healAtOnce)
	var id string
	boom := errors.New("boom")
	h.prov.Register("doomed", inproc.Sequence(func(context.Context, *inproc.Turn) (string, error) {
		failLog(h, id)
		return "", boom
	}, inproc.Reply("next")))
	boss := h.create("boss", "", "echo")
	id = h.create("kid", boss, "doomed")
	res, err := h.c.Send(context.Background(), id, "hi", "", "", nil)
	if err != nil || !errors.Is(res.Err, boom) || errors.Is(res.Err, eventlog.ErrPoisoned) || res.Status != session.StatusIdle {
		t.Fatalf("result %+v, %v; want the turn's error, idle", res, err)
	}
	a := mustAgent(t, h.c, id)
	if run, event, _, ok := a.OwedEnd(); !ok || run != res.RunID || event != schema.TurnFailed {
		t.Fatalf("owed %v %s %s; want turn.failed of run %s", ok, run, event, res.RunID)
	}
	if s := h.sessionJSON(id); s.State != session.StateRunning || s.Run == nil || s.Run.RunID != res.RunID {
		t.Errorf("session.json %s %+v; want it still running the run (no save)", s.State, s.Run)
	}
	if heldOf(a) || failureNotices(h, boss, id) != 0 {
		t.Errorf("held %v, parent's failure notices %d; want neither", heldOf(a), failureNotices(h, boss, id))
	}
	h.fs.ClearRules()
	if next := h.send(id, "again"); next.Response != "next" {
		t.Fatalf("the turn after the log healed: %+v", next)
	}
	if got := turnEvents(h, id); fmt.Sprint(got) != fmt.Sprint([]string{schema.TurnStart, schema.TurnFailed, schema.TurnStart, schema.TurnComplete}) {
		t.Fatalf("turn entries %v; want the owed turn.failed before the next turn", got)
	}
	var fd schema.TurnFailedData
	firstOf(h, id, schema.TurnFailed, &fd)
	if fd.RunID != res.RunID || fd.Error != res.Err.Error() {
		t.Errorf("the owed turn.failed %+v; want run %s with the turn's error", fd, res.RunID)
	}
}

// A turn.retry the log refuses ends the attempts: no retry is sent, and
// the turn fails naming the log's error and the provider's.
func TestRetryNotLoggedEndsTheAttempts(t *testing.T) {
	h := newHarness(t, healAtOnce)
	overloaded := providerTransient(errors.New("overloaded"))
	var id string
	h.prov.Register("flaky", func(context.Context, *inproc.Turn) (string, error) {
		// The next write to the agent's log (turn.retry's) fails once.
		h.fs.Inject(faultfs.Rule{Kind: faultfs.OpWrite, Path: id + "/events.pending", Err: syscall.EIO})
		return "", overloaded
	})
	id = h.create("a", "", "flaky")
	before := len(h.entries(id))
	res, err := h.c.Send(context.Background(), id, "hi", "", "", nil)
	if err != nil || res.Err == nil || !strings.HasPrefix(res.Err.Error(), "logging turn.retry: eventlog: ") ||
		!errors.Is(res.Err, syscall.EIO) || !strings.HasSuffix(res.Err.Error(), fmt.Sprintf("(after inproc model %q: %v)", "flaky", overloaded)) {
		t.Fatalf("result %+v, %v; want the retry's log error naming the provider's", res, err)
	}
	if n := h.prov.Calls("flaky"); n != 1 || len(h.delays) != 0 {
		t.Fatalf("%d sends, slept %v; want 1 send and no backoff", n, h.delays)
	}
	if ev := h.eventsSince(id, before); fmt.Sprint(ev) != fmt.Sprint([]string{schema.TurnStart, schema.TurnFailed}) {
		t.Fatalf("the turn logged %v; want turn.start, turn.failed", ev)
	}
	var fd schema.TurnFailedData
	lastOf(h, id, schema.TurnFailed, &fd)
	if fd.Error != res.Err.Error() || fd.Attempts != 1 {
		t.Errorf("turn.failed %+v; want the retry's log error after 1 attempt", fd)
	}
}

// A tool.call entry that cannot be logged fails the turn with the log's
// error although the provider answered, and discards the provider session
// (it counts the turn as done; the log does not).
func TestCallNotLoggedDiscardsTheSession(t *testing.T) {
	h := newHarness(t, healAtOnce)
	var kid string
	h.prov.Register("sender", inproc.Sequence(func(_ context.Context, tr *inproc.Turn) (string, error) {
		h.fs.Inject(faultfs.Rule{Kind: faultfs.OpSync, Path: kid + "/events.jsonl"})
		r, err := tr.Call("send_message", map[string]any{"recipient": "boss", "text": "report"})
		if err := errOf(r, err); err != nil {
			return "", err
		}
		return "sent", nil
	}, inproc.Reply("next")))
	boss := h.create("boss", "", "echo")
	kid = h.create("kid", boss, "sender")
	before := len(h.entries(kid))
	res, err := h.c.Send(context.Background(), kid, "hi", "", "", nil)
	if err != nil || !errors.Is(res.Err, faultfs.ErrInjected) || !errors.Is(res.Err, syscall.EIO) || res.Response != "" {
		t.Fatalf("result %+v, %v; want the tool.call write's error", res, err)
	}
	if ev := h.eventsSince(kid, before); fmt.Sprint(ev) != fmt.Sprint([]string{schema.TurnStart, schema.TurnFailed}) {
		t.Fatalf("the turn logged %v; want turn.start, turn.failed", ev)
	}
	var fd schema.TurnFailedData
	lastOf(h, kid, schema.TurnFailed, &fd)
	if fd.Error != res.Err.Error() {
		t.Errorf("turn.failed %+v; want the tool.call write's error", fd)
	}
	if s := h.sessionJSON(kid); s.State != session.StateIdle || s.Run != nil {
		t.Errorf("session.json %s %+v; want idle with no run", s.State, s.Run)
	}
	if !heldOf(mustAgent(t, h.c, kid)) || failureNotices(h, boss, kid) != 1 {
		t.Errorf("held %v, parent's failure notices %d; want held and 1", heldOf(mustAgent(t, h.c, kid)), failureNotices(h, boss, kid))
	}
	if !nextTurnReopens(h, kid, "again") {
		t.Error("the session was kept after its tool.call was not logged; want it discarded")
	}
}
