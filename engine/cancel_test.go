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
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/session"
	"github.com/warren-dev/warren/token"
)

// Cancelling a run (Core.Cancel): a running turn, a wait, a run owed its
// end.

// A running turn is cancelled and Cancel returns once it ended, with the
// error of an end that could not be logged; a caller that stops waiting
// gets its context's error.
func TestCancelStopsTheRunningTurn(t *testing.T) {
	hold := newHoldFS()
	defer hold.let()
	h := newHarness(t, func(h *harness) {
		h.healBackoff = -1
		h.noWake = true
		h.wrapFS = func(fsys faultfs.FS) faultfs.FS { hold.FS = fsys; return hold }
	})
	started := make(chan *inproc.Turn, 1)
	h.prov.Register("slow", inproc.Signal(started, inproc.Block(make(chan struct{}), inproc.Echo)))
	run := func(id string) <-chan TurnResult {
		done := make(chan TurnResult, 1)
		go func() { res, _ := h.c.Send(context.Background(), id, "x", "", "", nil); done <- res }()
		<-started
		return done
	}

	plain := h.create("plain", "", "slow")
	done := run(plain)
	if err := h.c.Cancel(context.Background(), plain); err != nil {
		t.Fatal(err)
	}
	if n := h.count(plain, schema.TurnCancelled); n != 1 {
		t.Fatalf("Cancel returned before the turn's end was logged (turn.cancelled x%d)", n)
	}
	<-done

	// A caller that stops waiting: the turn's end is held in its write.
	impatient := h.create("impatient", "", "slow")
	done = run(impatient)
	hold.arm(impatient + "/events.jsonl")
	entered := make(chan struct{})
	go func() { <-hold.entered; close(entered) }() // also when the test fails: the held write then lets go
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h.c.Cancel(ctx, impatient); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	<-entered
	hold.let()
	<-done
	if n := h.count(impatient, schema.TurnCancelled); n != 1 {
		t.Fatalf("turn.cancelled x%d once the turn ended", n)
	}

	// The end could not be logged: Cancel says so (the owed end).
	owing := h.create("owing", "", "slow")
	done = run(owing)
	h.fs.Inject(faultfs.Rule{Kind: faultfs.OpWrite, Path: owing + "/events.jsonl", Err: syscall.EROFS, Sticky: true})
	err := h.c.Cancel(context.Background(), owing)
	<-done
	owed := mustAgent(t, h.c, owing).OwedErr()
	if owed == nil || err == nil || err.Error() != owed.Error() || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Cancel = %v, want the owed end's error %v", err, owed)
	}
	h.fs.ClearRules()
}

// Cancelling a wait revokes its token (token.revoked, reason cancelled)
// before turn.cancelled, under a claim released at the end (session.json
// says idle); an open run without a live wait gets turn.cancelled alone.
func TestCancelEndsTheWaitOrTheRun(t *testing.T) {
	lw := &groupWrites{}
	h := newHarness(t, recordWrites(lw), func(h *harness) { h.saveDelay = -1 })
	h.prov.Register("ask", askThen(nil))
	started, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	h.prov.Register("work", held(started, release, inproc.Echo))
	waiting := h.create("waiting", "", "ask")
	h.send(waiting, "one")
	res := h.send(waiting, "two") // revokes the first wait: turn 2 waits
	tokID := waitTokenID(t, h, waiting)
	worker := h.create("worker", "", "work")
	busyAgent(h, worker, started)
	h.crash(faultfs.ProcessCrash)

	if err := h.c.Cancel(context.Background(), waiting); err != nil {
		t.Fatal(err)
	}
	ws := lw.of(waiting)
	if got := strings.Join(ws[len(ws)-2:], " "); got != "token.revoked turn.cancelled" {
		t.Fatalf("the cancel's writes %q, want token.revoked then turn.cancelled", got)
	}
	if d := dataAs[schema.TokenData](t, lastEntry(t, h, waiting, schema.TokenRevoked)); d != (schema.TokenData{TokenID: tokID, RunID: res.RunID, Reason: schema.RevokeCancelled}) {
		t.Fatalf("token.revoked %+v", d)
	}
	if d := dataAs[schema.TurnCancelledData](t, lastEntry(t, h, waiting, schema.TurnCancelled)); d != (schema.TurnCancelledData{RunID: res.RunID, Turn: 2}) {
		t.Fatalf("turn.cancelled %+v", d)
	}
	if got, _ := h.c.tokens.Get(tokID); got.State != token.Revoked {
		t.Fatalf("token %s", got.State)
	}

	runID := runOf(lastEntry(t, h, worker, schema.TurnStart))
	before := h.count(worker, schema.TokenRevoked)
	if err := h.c.Cancel(context.Background(), worker); err != nil {
		t.Fatal(err)
	}
	if ws := lw.of(worker); ws[len(ws)-1] != "turn.cancelled" || h.count(worker, schema.TokenRevoked) != before {
		t.Fatalf("the cancel of an interrupted run wrote %q", ws)
	}
	if d := dataAs[schema.TurnCancelledData](t, lastEntry(t, h, worker, schema.TurnCancelled)); d != (schema.TurnCancelledData{RunID: runID, Turn: 1}) {
		t.Fatalf("turn.cancelled %+v", d)
	}
	for _, id := range []string{waiting, worker} {
		a := mustAgent(t, h.c, id)
		if isBusy(a) || h.statusOf(id) != "idle" {
			t.Fatalf("agent %s: busy %v, status %s after the cancel", id, isBusy(a), h.statusOf(id))
		}
		if s := savedSession(t, h, id); s.State != session.StateIdle || s.Run != nil {
			t.Fatalf("session.json of %s after the cancel: %s, run %+v", id, s.State, s.Run)
		}
	}
}

// With nothing to cancel, Cancel is refused (ErrWrongState) before it
// claims (an agent released, as after a lost lease, whose claim would be
// refused, gets that refusal too); a refused claim comes back as it is.
func TestCancelRefusals(t *testing.T) {
	h := newHarness(t)
	h.prov.Register("ask", askThen(nil))
	fresh := h.create("fresh", "", "echo")
	ended := h.create("ended", "", "echo")
	h.send(ended, "hi")
	released := h.create("released", "", "echo")
	waiting := h.create("waiting", "", "ask")
	h.send(waiting, "go")
	for _, id := range []string{released, waiting} {
		h.c.releaseAgent(id, errors.New("the lease was lost (test)"))
	}
	for id, name := range map[string]string{fresh: "fresh", ended: "ended", released: "released"} {
		before := len(h.entries(id))
		err := h.c.Cancel(context.Background(), id)
		if !errors.Is(err, ErrWrongState) || err.Error() != "agent "+name+" has no running turn or wait to cancel" {
			t.Fatalf("%s: %v", name, err)
		}
		if n := len(h.entries(id)); n != before {
			t.Fatalf("%s: a refused cancel logged %d entries", name, n-before)
		}
	}
	a := mustAgent(t, h.c, waiting)
	want := a.Claim() // refused (the agent is released): changes nothing
	before := len(h.entries(waiting))
	if err := h.c.Cancel(context.Background(), waiting); want == nil || err == nil || err.Error() != want.Error() || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("cancel whose claim is refused: %v, want the claim's %v", err, want)
	}
	if n := len(h.entries(waiting)); n != before {
		t.Fatalf("a cancel whose claim was refused logged %d entries", n-before)
	}
}

// An owed run end is written instead of anything else; if it still cannot
// be, the owed error says so. (The old test gave the agent a live wait as
// well; through the engine a run whose end is owed does not wait: it is
// the end of a turn that was running.)
func TestCancelWritesTheOwedEnd(t *testing.T) {
	h := faultHarness(t)
	id, res := turnEndingOnAFullDisk(h)
	if !errors.Is(res.Err, ErrUnavailable) {
		t.Fatalf("a turn whose turn.complete cannot be logged: %+v", res)
	}
	a := mustAgent(t, h.c, id)
	if !a.Owed() {
		t.Fatal("the run's end is not owed")
	}
	before := h.events(id)
	err := h.c.Cancel(context.Background(), id)
	if owed := a.OwedErr(); owed == nil || err == nil || err.Error() != owed.Error() {
		t.Fatalf("Cancel under the fault = %v, want the owed error %v", err, owed)
	}
	if isBusy(a) {
		t.Fatal("the agent is still claimed after the cancel")
	}
	h.fs.ClearRules()
	if err := h.c.Cancel(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	got := h.events(id)
	if want := append(before, schema.TurnFailed); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("log after the cancel %v, want %v (the owed end alone)", got, want)
	}
	if a.Owed() || isBusy(a) || h.statusOf(id) != "idle" {
		t.Fatalf("after the cancel: owed %v, busy %v, status %s", a.Owed(), isBusy(a), h.statusOf(id))
	}
}

// A turn.cancelled that cannot be logged leaves the run open; a log that
// refuses appends until it heals makes that ErrUnavailable. (A log of
// files refuses every failed append until it heals; the plain error is
// that of a store that refuses an append otherwise: stepStore.)
func TestCancelThatCannotBeLogged(t *testing.T) {
	st := &stepStore{}
	h := newHarness(t, withStepStore(st))
	started, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	h.prov.Register("work", held(started, release, inproc.Echo))
	id := h.create("lead", "", "work")
	busyAgent(h, id, started)
	h.crash(faultfs.ProcessCrash)
	a := mustAgent(t, h.c, id)
	want := "logging turn.cancelled for agent lead: %v; the run is still open in the log and nothing else changed; retry agent cancel once the log accepts appends"
	for _, tc := range []struct {
		cause error
		kind  error
	}{
		{errors.New("disk full"), nil},
		{fmt.Errorf("%w: no space", eventlog.ErrPoisoned), ErrUnavailable},
	} {
		st.refuse(id, tc.cause)
		err := h.c.Cancel(context.Background(), id)
		var d *domainError
		if !errors.Is(err, tc.cause) || err.Error() != fmt.Sprintf(want, tc.cause) {
			t.Fatalf("cause %v: %v", tc.cause, err)
		}
		if tc.kind == nil && errors.As(err, &d) || tc.kind != nil && !errors.Is(err, tc.kind) {
			t.Fatalf("cause %v: %v, want kind %v", tc.cause, err, tc.kind)
		}
		if isBusy(a) {
			t.Fatal("the agent is still claimed")
		}
		if h.count(id, schema.TurnCancelled) != 0 || h.statusOf(id) == "idle" {
			t.Fatalf("the run is not open: status %s", h.statusOf(id))
		}
	}
	st.refuse(id, nil)
	if err := h.c.Cancel(context.Background(), id); err != nil || h.count(id, schema.TurnCancelled) != 1 {
		t.Fatalf("cancel once the log takes it: %v", err)
	}
}

// TestCancelRacingASuspensionCancelsTheWait: an operator's cancel reaches
// a turn after its await_input suspended the run and before the provider
// answered (on a worker: during the hand-back). The turn ends suspended,
// and the cancel goes on to cancel the wait it left: the agent is idle,
// the token revoked, the run ended by turn.cancelled, as the operator
// asked.
func TestCancelRacingASuspensionCancelsTheWait(t *testing.T) {
	suspended := make(chan struct{})
	p := &funcProv{send: func(ctx context.Context, _, _ string, io provider.TurnIO) (string, error) {
		if _, err := io.Tools.CallTool(ctx, "await_input", map[string]any{"kind": "approval", "prompt": "ok?", "timeout": 3600}); !errors.Is(err, provider.ErrRunSuspended) {
			return "", fmt.Errorf("await_input answered %v, want the run suspended", err)
		}
		close(suspended)
		<-ctx.Done() // the hand-back, cut by the cancel
		return "", ctx.Err()
	}}
	h := newHarness(t, func(h *harness) { h.extra = map[string]provider.Provider{"fn": p} })
	id := h.createOn("w", "fn")
	before := len(h.entries(id))
	results := make(chan TurnResult, 1)
	go func() { results <- h.send(id, "go") }()
	<-suspended
	if err := h.c.Cancel(context.Background(), id); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if res := <-results; res.Status != session.StatusSuspended {
		t.Fatalf("the turn ended %+v; want it suspended (the await_input before the cancel)", res)
	}
	if s := h.statusOf(id); s != string(session.StatusIdle) {
		t.Fatalf("after the cancel the agent is %s, want idle; log %v", s, h.eventsSince(id, before))
	}
	var revoked, cancelled int
	for _, ev := range h.eventsSince(id, before) {
		switch ev {
		case schema.TokenRevoked:
			revoked++
		case schema.TurnCancelled:
			cancelled++
		}
	}
	if revoked != 1 || cancelled != 1 {
		t.Fatalf("log %v; want the wait's token revoked and the run cancelled, once each", h.eventsSince(id, before))
	}
}
