package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/config"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/schedule"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/session"
	"github.com/warren-dev/warren/token"
	"github.com/warren-dev/warren/tools"
)

// The tests of the former engine/internal/waits (waits.go: beginWait,
// armDeadline, sweepWaits, revokeToken), through a real Core. The tests
// of resume.go are in resume_test.go.

// lastEntry is the last entry of agent id's log with the event (the test
// fails if there is none).
func lastEntry(t *testing.T, h *harness, id, event string) eventlog.Entry {
	t.Helper()
	es := h.entries(id)
	for i := len(es) - 1; i >= 0; i-- {
		if es[i].Event == event {
			return es[i]
		}
	}
	t.Fatalf("no %s in the log of %s: %s", event, id, eventNames(es))
	return eventlog.Entry{}
}

// dataAs decodes an entry's data into a T.
func dataAs[T any](t *testing.T, e eventlog.Entry) T {
	t.Helper()
	var v T
	if err := decode(e, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// Begin mints a token due at now plus the timeout (24 h when none is
// given), logs run.waiting and token.minted in one write, registers the
// token and keeps the secret until it is taken, once; it reads the clock
// once. (The clock's reads cannot be counted through the engine; the
// deadline is the fake clock's now plus the timeout, in UTC although the
// clock reads in another zone. The await_input tool requires a positive
// timeout, so the default is reached by calling beginWait from the turn
// as the tool does, with none.)
func TestBeginLogsTheWaitAndKeepsTheSecret(t *testing.T) {
	lw := &groupWrites{}
	start := clockStart.In(time.FixedZone("east", 3600))
	h := newHarness(t, recordWrites(lw), func(h *harness) { h.clock = schedule.NewFake(start) })
	h.prov.Register("ask", func(ctx context.Context, tr *inproc.Turn) (string, error) {
		r, err := tr.Call("await_input", map[string]any{"kind": "approval", "prompt": "ok?", "timeout": 60})
		if err != nil {
			return "", err
		}
		return "answered: " + r["response"].(string), nil
	})
	h.prov.Register("ask-default", func(ctx context.Context, tr *inproc.Turn) (string, error) {
		a := mustAgent(t, h.c, tr.AgentID)
		run := a.WaitState().Run
		return "", h.c.beginWait(a, tools.AwaitInput{Kind: "input", Prompt: "name?"}, run.RunID, run.Turn)
	})
	id := h.create("lead", "", "ask")
	shown, unsubscribe := h.c.bus.Subscribe(id)
	defer unsubscribe()
	res := h.send(id, "go")
	if res.Status != session.StatusSuspended || res.Token == "" {
		t.Fatalf("send = %+v, want suspended with the token", res)
	}
	hasWrite(t, lw, id, "run.waiting+token.minted")
	rw := dataAs[schema.RunWaitingData](t, lastEntry(t, h, id, schema.RunWaiting))
	tm := dataAs[schema.TokenData](t, lastEntry(t, h, id, schema.TokenMinted))
	deadline := clockStart.Add(time.Minute)
	if rw.RunID != res.RunID || rw.WaitKind != "approval" || rw.Prompt != "ok?" || rw.Turn != 1 ||
		rw.Deadline != deadline.UTC().Format(time.RFC3339Nano) || rw.TokenID == "" || rw.SecretHash == "" ||
		tm.TokenID != rw.TokenID || tm.RunID != res.RunID {
		t.Fatalf("logged %+v and %+v; want the run, its turn and a deadline of %s in UTC", rw, tm, deadline.UTC().Format(time.RFC3339Nano))
	}
	tok, ok := h.c.tokens.Get(rw.TokenID)
	if !ok || tok.State != token.Live || tok.AgentID != id || tok.RunID != res.RunID || !tok.Deadline.Equal(deadline) ||
		tok.Deadline.Location() != time.UTC || tok.SecretHash != rw.SecretHash {
		t.Fatalf("registered token %+v (known %v)", tok, ok)
	}
	// The secret was kept from the mint (the live run.waiting shows it)
	// until the turn's result took it, once.
	var live string
	for drained := false; !drained; {
		select {
		case ev := <-shown:
			if ev.Entry.Event == schema.RunWaiting {
				live = ev.Token
			}
		default:
			drained = true
		}
	}
	if live == "" || live != res.Token {
		t.Fatalf("the live run.waiting showed the secret %q, want the result's %q", live, res.Token)
	}
	if tid, _, err := token.Parse(res.Token); err != nil || tid != rw.TokenID {
		t.Fatalf("the result's token %q (id %q, err %v) is not the client string of %s", res.Token, tid, err, rw.TokenID)
	}
	a := mustAgent(t, h.c, id)
	if s := a.Resumes().Secret(res.RunID); s != "" {
		t.Fatalf("the secret %q is still kept after the result took it", s)
	}
	if s := a.Resumes().Take(res.RunID); s != "" {
		t.Fatalf("a second Take gave %q, want nothing", s)
	}
	if out, err := h.c.Resume(context.Background(), id, res.Token, "yes"); err != nil || out.Response != "answered: yes" {
		t.Fatalf("resume with the kept secret: %+v, %v", out, err)
	}

	other := h.create("other", "", "ask-default")
	if res := h.send(other, "go"); res.Status != session.StatusSuspended || res.Token == "" {
		t.Fatalf("send = %+v, want suspended with the token", res)
	}
	hasWrite(t, lw, other, "run.waiting+token.minted")
	if d := dataAs[schema.RunWaitingData](t, lastEntry(t, h, other, schema.RunWaiting)).Deadline; d != clockStart.Add(24*time.Hour).UTC().Format(time.RFC3339Nano) {
		t.Fatalf("deadline without a timeout: %s, want 24 h on", d)
	}
}

// A wait that could not be logged leaves nothing behind: no secret, no
// token (nor a USER notice); the error is the log's, not a refusal.
func TestBeginThatCannotLogLeavesNothing(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.healBackoff = -1 })
	started, armed := make(chan struct{}), make(chan struct{})
	waitErr := make(chan error, 1)
	h.prov.Register("ask", held(started, armed, func(ctx context.Context, tr *inproc.Turn) (string, error) {
		_, err := tr.Call("await_input", map[string]any{"kind": "approval", "prompt": "ok?", "timeout": 60})
		waitErr <- err
		return "", err
	}))
	id := h.create("lead", "", "ask")
	done := busyAgent(h, id, started)
	h.fs.Inject(faultfs.Rule{Kind: faultfs.OpWrite, Path: id + "/events.jsonl", Err: syscall.ENOSPC})
	close(armed)
	err := <-waitErr
	<-done
	if err == nil || !strings.Contains(err.Error(), "logging run.waiting: ") || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("await_input whose wait could not be logged: %v", err)
	}
	errIsNot(t, err, ErrTokenRejected, ErrWrongState, ErrInvalid, ErrNotFound)
	h.quiet()
	runID := runOf(lastEntry(t, h, id, schema.TurnStart))
	if s := mustAgent(t, h.c, id).Resumes().Secret(runID); s != "" {
		t.Fatalf("the secret %q is still kept", s)
	}
	if tok, ok := h.c.tokens.Live(id); ok {
		t.Fatalf("a token was registered for a wait that was not logged: %+v", tok)
	}
	if n := h.count(id, schema.RunWaiting) + h.count(id, schema.TokenMinted); n != 0 {
		t.Fatalf("%d wait entries in the log", n)
	}
	if ws, msgs := h.c.Waits(), h.c.UserPending(context.Background()); len(ws) != 0 || len(msgs) != 0 {
		t.Fatalf("waits %+v, USER inbox %+v; want none", ws, msgs)
	}
	h.crash(faultfs.ProcessCrash)
	if n := h.count(id, schema.RunWaiting); n != 0 || len(h.c.Waits()) != 0 {
		t.Fatalf("after a crash: %d run.waiting, waits %+v", n, h.c.Waits())
	}
}

// stepClock is a fake clock whose readings are back behind the fake time:
// a wall clock stepped back. Its timers run on the fake time, so a sweep
// armed for an instant fires on time and then reads a clock that says the
// instant has not come.
type stepClock struct {
	*schedule.Fake
	back atomic.Int64 // nanoseconds
}

func (c *stepClock) Now() time.Time { return c.Fake.Now().Add(-time.Duration(c.back.Load())) }

// Arm schedules the sweep one nanosecond past the deadline and again
// while the clock, read after the sweep, is not past it. (The harness's
// clock is a schedule.Fake, which never steps back: this test runs a
// Core of its own on a clock that does, through CoreOptions.Clock.)
func TestArmSweepsPastTheDeadlineAndAgainIfTheClockStepsBack(t *testing.T) {
	clk := &stepClock{Fake: schedule.NewFake(clockStart)}
	fsys := faultfs.NewMem()
	prov := inproc.New("inproc", inproc.Options{})
	prov.Register("ask", asker(60))
	c, err := NewCore(context.Background(), withDefaults(CoreOptions{FS: fsys, Home: "/home", Clock: clk,
		Providers: map[string]provider.Provider{"inproc": prov}, DefaultModel: "echo",
		Config: config.Default(), Logger: hclog.NewNullLogger(), SessionSaveDelay: -1}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	id, err := c.CreateAgent(context.Background(), CreateSpec{Name: "lead", Provider: "inproc", Model: "ask"})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := c.Send(context.Background(), id, "go", "", "", nil); err != nil || res.Status != session.StatusSuspended {
		t.Fatalf("send = %+v, %v", res, err)
	}
	expired := func() int {
		es, err := eventlog.ReadAll(fsys, c.logPath(id))
		if err != nil {
			t.Fatal(err)
		}
		return countEvent(es, schema.TokenExpired)
	}
	deadline := clockStart.Add(time.Minute)
	clk.Set(deadline)
	if n := expired(); n != 0 {
		t.Fatal("the wait expired at its deadline; the sweep is armed one nanosecond past it")
	}
	// The wall clock steps back a second; the sweep fires one nanosecond
	// past the deadline, finds the clock a second before that and arms
	// itself again for that instant, a second later on the fake time.
	clk.back.Store(int64(time.Second))
	clk.Set(deadline.Add(time.Nanosecond))
	if n := expired(); n != 0 {
		t.Fatal("the sweep expired the wait while its clock was not past the deadline")
	}
	clk.Set(deadline.Add(time.Second))
	if n := expired(); n != 0 {
		t.Fatal("the sweep armed again fired early")
	}
	clk.Advance(time.Nanosecond)
	if n := expired(); n != 1 {
		t.Fatalf("after the clock passed the deadline the wait was expired %d times, want once: the sweep was not armed again", n)
	}
	// Past the deadline the sweep does not arm itself again (it would
	// fire at once, for ever, on the fake clock).
	clk.Advance(time.Hour)
	if n := expired(); n != 1 {
		t.Fatalf("token.expired x%d", n)
	}
}

// Sweep expires only the overdue live waits, each with run.interrupted
// (wait_timeout) and token.expired in one write, then tells the agent
// (session.json says idle); a wait whose write fails stays live (and
// expires at the next sweep), and a token of an agent that is gone
// expires with nothing written.
func TestSweepExpiresOverdueWaits(t *testing.T) {
	lw := &groupWrites{}
	h := newHarness(t, withFakeClock, recordWrites(lw), func(h *harness) {
		h.healBackoff = -1
		h.saveDelay = -1
	})
	h.prov.Register("soon", asker(60))
	h.prov.Register("later", asker(3600))
	due := h.create("due", "", "soon")
	notYet := h.create("not-yet", "", "later")
	failing := h.create("failing", "", "soon")
	tokOf := map[string]string{}
	for _, id := range []string{due, notYet, failing} {
		h.send(id, "go")
		tokOf[id] = dataAs[schema.RunWaitingData](t, lastEntry(t, h, id, schema.RunWaiting)).TokenID
	}
	// A token of an agent this core does not have (nothing to write to).
	gone, _, err := token.Mint("gone", "run-gone", clockStart.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.c.tokens.Add(gone); err != nil {
		t.Fatal(err)
	}
	if s := savedSession(t, h, due).State; s != session.StateSuspended {
		t.Fatalf("session.json of the waiting agent says %s", s)
	}
	h.fs.Inject(faultfs.Rule{Kind: faultfs.OpWrite, Path: failing + "/events.jsonl", Err: syscall.ENOSPC, Sticky: true})
	h.clock.Advance(2 * time.Minute)

	hasWrite(t, lw, due, "run.interrupted+token.expired")
	ri := dataAs[schema.RunInterruptedData](t, lastEntry(t, h, due, schema.RunInterrupted))
	te := dataAs[schema.TokenData](t, lastEntry(t, h, due, schema.TokenExpired))
	runID := runOf(lastEntry(t, h, due, schema.RunWaiting))
	if ri.RunID != runID || ri.Reason != schema.ReasonWaitTimeout || te.TokenID != tokOf[due] || te.RunID != runID {
		t.Fatalf("logged %+v and %+v", ri, te)
	}
	if s := savedSession(t, h, due).State; s != session.StateIdle {
		t.Fatalf("session.json of the expired wait's agent says %s, want idle", s)
	}
	for _, id := range []string{notYet, failing} {
		if n := h.count(id, schema.RunInterrupted) + h.count(id, schema.TokenExpired); n != 0 {
			t.Fatalf("%d expiry entries in the log of %s", n, id)
		}
	}
	for id, want := range map[string]token.State{tokOf[due]: token.Expired, tokOf[notYet]: token.Live, tokOf[failing]: token.Live, gone.ID: token.Expired} {
		if got, _ := h.c.tokens.Get(id); got.State != want {
			t.Fatalf("token %s is %s, want %s", id, got.State, want)
		}
	}
	if ok, err := faultfs.Exists(h.fs, "/home/agents/gone"); ok || err != nil {
		t.Fatalf("something was written for the agent that is gone (%v, %v)", ok, err)
	}
	h.fs.ClearRules()
	h.c.SweepWaits()
	if got, _ := h.c.tokens.Get(tokOf[failing]); got.State != token.Expired || h.count(failing, schema.TokenExpired) != 1 {
		t.Fatalf("the wait whose write failed: token %s, %d token.expired after the next sweep", got.State, h.count(failing, schema.TokenExpired))
	}
}

// Revoke logs token.revoked with the reason and revokes the token; a token
// no longer live is left alone, and a failed write leaves it live.
func TestRevoke(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.healBackoff = -1 })
	h.prov.Register("ask", asker(3600))
	id := h.create("lead", "", "ask")
	res := h.send(id, "go")
	tokID := dataAs[schema.RunWaitingData](t, lastEntry(t, h, id, schema.RunWaiting)).TokenID
	a := mustAgent(t, h.c, id)

	h.fs.Inject(faultfs.Rule{Kind: faultfs.OpWrite, Path: id + "/events.jsonl", Err: syscall.ENOSPC, Sticky: true})
	err := h.c.revokeToken(a, tokID, res.RunID, schema.RevokeNewMessage)
	if err == nil || !strings.HasPrefix(err.Error(), "revoking token "+tokID+": ") || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("revoke whose write failed: %v", err)
	}
	if got, _ := h.c.tokens.Get(tokID); got.State != token.Live {
		t.Fatalf("token %s after a failed revoke", got.State)
	}
	h.fs.ClearRules()
	if n := h.count(id, schema.TokenRevoked); n != 0 {
		t.Fatalf("token.revoked logged %d times by a failed revoke", n)
	}
	if err := h.c.revokeToken(a, tokID, res.RunID, schema.RevokeNewMessage); err != nil {
		t.Fatal(err)
	}
	if d := dataAs[schema.TokenData](t, lastEntry(t, h, id, schema.TokenRevoked)); d != (schema.TokenData{TokenID: tokID, RunID: res.RunID, Reason: schema.RevokeNewMessage}) {
		t.Fatalf("logged %+v", d)
	}
	if got, _ := h.c.tokens.Get(tokID); got.State != token.Revoked {
		t.Fatalf("token %s", got.State)
	}
	// Revoked already, or consumed: nothing to revoke, nothing logged, no
	// error.
	if err := h.c.revokeToken(a, tokID, res.RunID, schema.RevokeCancelled); err != nil {
		t.Fatalf("revoking a revoked token: %v", err)
	}
	other := h.create("other", "", "ask")
	res2 := h.send(other, "go")
	tok2 := dataAs[schema.RunWaitingData](t, lastEntry(t, h, other, schema.RunWaiting)).TokenID
	if _, err := h.c.Resume(context.Background(), other, res2.Token, "yes"); err != nil {
		t.Fatal(err)
	}
	if err := h.c.revokeToken(mustAgent(t, h.c, other), tok2, res2.RunID, schema.RevokeCancelled); err != nil {
		t.Fatalf("revoking a consumed token: %v", err)
	}
	if got, _ := h.c.tokens.Get(tok2); got.State != token.Consumed {
		t.Fatalf("consumed token %s after a revoke", got.State)
	}
	if n, m := h.count(id, schema.TokenRevoked), h.count(other, schema.TokenRevoked); n != 1 || m != 0 {
		t.Fatalf("token.revoked logged %d and %d times, want once for the live token only", n, m)
	}
}

// Each kind of refusal is the engine's domain error of that kind (package
// domainerr) with the refusal's text, so nothing maps it again before the
// RPC edge; a failed log write is a refusal only when the log refuses
// appends until it heals, other errors pass unchanged. (It tested the
// engine's waitErr, then package waits' refuse; the engine makes them
// with failf, and logFailure.)
func TestWaitErrMapsEachRefusal(t *testing.T) {
	cause := errors.New("the cause")
	for _, kind := range []error{ErrTokenRejected, ErrWrongState, ErrUnavailable} {
		err := failf(kind, "refused: %w", cause)
		var d *domainError
		if !errors.Is(err, kind) || !errors.Is(err, cause) || err.Error() != "refused: the cause" || !errors.As(err, &d) || d.Kind != kind {
			t.Fatalf("kind %v: %v", kind, err)
		}
	}
	poisoned := fmt.Errorf("%w: no space", eventlog.ErrPoisoned)
	var d *domainError
	if err := logFailure(poisoned); !errors.As(err, &d) || d.Kind != ErrUnavailable || !errors.Is(err, poisoned) {
		t.Fatalf("a poisoned log: %v", err)
	}
	if err := logFailure(cause); err != cause {
		t.Fatalf("a plain error became %v", err)
	}
	if logFailure(nil) != nil {
		t.Fatal("nil became an error")
	}
}
