package waits

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/warren-dev/warren/engine/internal/domainerr"
	"github.com/warren-dev/warren/eventlog"
	fold "github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/token"
	"github.com/warren-dev/warren/tools"
)

// Begin mints a token due at now plus the timeout (24 h when none is
// given), logs run.waiting and token.minted in one write, registers the
// token and keeps the secret until it is taken, once; it reads the clock
// once.
func TestBeginLogsTheWaitAndKeepsTheSecret(t *testing.T) {
	clk := &clock{now: t0.In(time.FixedZone("east", 3600))}
	w := newWaits(clk)
	ag := newAgent(fold.Run{})
	deadline, err := w.Begin(ag, tools.AwaitInput{Kind: "approval", Prompt: "ok?"}, "run-1", 3)
	if err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(DefaultTimeout); !deadline.Equal(want) || deadline.Location() != time.UTC {
		t.Fatalf("deadline %v, want %v in UTC", deadline, want)
	}
	if clk.reads != 1 {
		t.Fatalf("the clock was read %d times, want once", clk.reads)
	}
	ag.wantSteps(t, "append run.waiting+token.minted")
	rw := ag.recs[0].Data.(schema.RunWaitingData)
	tm := ag.recs[1].Data.(schema.TokenData)
	if rw.RunID != "run-1" || rw.WaitKind != "approval" || rw.Prompt != "ok?" || rw.Turn != 3 ||
		rw.Deadline != deadline.Format(time.RFC3339Nano) || rw.TokenID == "" || rw.SecretHash == "" ||
		tm.TokenID != rw.TokenID || tm.RunID != "run-1" {
		t.Fatalf("logged %+v and %+v", rw, tm)
	}
	tok, ok := w.Tokens.Get(rw.TokenID)
	if !ok || tok.State != token.Live || tok.AgentID != "ag-1" || tok.RunID != "run-1" || !tok.Deadline.Equal(deadline) {
		t.Fatalf("registered token %+v (known %v)", tok, ok)
	}
	secret := ag.resumes.Secret("run-1")
	if id, _, err := token.Parse(secret); err != nil || id != rw.TokenID {
		t.Fatalf("kept secret %q (id %q, err %v), want the client string of %s", secret, id, err, rw.TokenID)
	}
	if got := ag.resumes.Take("run-1"); got != secret {
		t.Fatalf("Take gave %q, want the secret", got)
	}
	if got := ag.resumes.Take("run-1"); got != "" {
		t.Fatalf("a second Take gave %q, want nothing", got)
	}

	if _, err := w.Begin(ag, tools.AwaitInput{Timeout: time.Minute}, "run-2", 1); err != nil {
		t.Fatal(err)
	}
	if d := ag.recs[2].Data.(schema.RunWaitingData).Deadline; d != t0.Add(time.Minute).Format(time.RFC3339Nano) {
		t.Fatalf("deadline with a timeout of a minute: %s", d)
	}
}

// A wait that could not be logged leaves nothing behind: no secret, no
// token.
func TestBeginThatCannotLogLeavesNothing(t *testing.T) {
	w := newWaits(&clock{now: t0})
	ag := newAgent(fold.Run{})
	ag.appendErr = errors.New("disk full")
	_, err := w.Begin(ag, tools.AwaitInput{}, "run-1", 1)
	if err == nil || err.Error() != "logging run.waiting: disk full" || refusal(err) != nil {
		t.Fatalf("err %v", err)
	}
	if s := ag.resumes.Secret("run-1"); s != "" {
		t.Fatalf("the secret %q is still kept", s)
	}
	if _, ok := w.Tokens.Live("ag-1"); ok {
		t.Fatal("a token was registered for a wait that was not logged")
	}
}

// Arm schedules the sweep one nanosecond past the deadline and again
// while the clock, read after the sweep, is not past it.
func TestArmSweepsPastTheDeadlineAndAgainIfTheClockStepsBack(t *testing.T) {
	clk := &clock{now: t0}
	w := newWaits(clk)
	deadline := t0.Add(time.Hour)
	type armed struct {
		at time.Time
		f  func()
	}
	var timers []armed
	at := func(t time.Time, f func()) bool { timers = append(timers, armed{t, f}); return true }
	sweeps := 0
	w.Arm(at, deadline, func() { sweeps++ })
	if len(timers) != 1 || !timers[0].at.Equal(deadline.Add(time.Nanosecond)) {
		t.Fatalf("armed %v", timers)
	}
	clk.set(deadline) // the wall clock stepped back: not past the deadline
	timers[0].f()
	if sweeps != 1 || len(timers) != 2 || !timers[1].at.Equal(deadline.Add(time.Nanosecond)) {
		t.Fatalf("after a sweep at the deadline: %d sweeps, armed %v", sweeps, timers)
	}
	clk.set(deadline.Add(time.Nanosecond))
	timers[1].f()
	if sweeps != 2 || len(timers) != 2 {
		t.Fatalf("after a sweep past the deadline: %d sweeps, %d timers, want no new one", sweeps, len(timers))
	}
}

// Sweep expires only the overdue live waits, each with run.interrupted
// (wait_timeout) and token.expired in one write, then tells the agent; a
// wait whose write fails stays live, and a token of an agent that is gone
// expires with nothing written.
func TestSweepExpiresOverdueWaits(t *testing.T) {
	clk := &clock{now: t0}
	w := newWaits(clk)
	mint := func(agentID, runID string, due time.Time) token.Token {
		tok, _, err := token.Mint(agentID, runID, due)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Tokens.Add(tok); err != nil {
			t.Fatal(err)
		}
		return tok
	}
	due := mint("ag-1", "run-1", t0.Add(-time.Second))
	notYet := mint("ag-2", "run-2", t0.Add(time.Hour))
	failing := mint("ag-3", "run-3", t0.Add(-time.Second))
	gone := mint("ag-4", "run-4", t0.Add(-time.Second))
	agents := map[string]*fakeAgent{"ag-1": newAgent(fold.Run{}), "ag-2": newAgent(fold.Run{}), "ag-3": newAgent(fold.Run{})}
	agents["ag-3"].appendErr = errors.New("disk full")
	w.Sweep(func(id string) (Agent[result], bool) {
		a, ok := agents[id]
		if !ok {
			return nil, false
		}
		return a, true
	})
	agents["ag-1"].wantSteps(t, "append run.interrupted+token.expired; expired")
	agents["ag-2"].wantSteps(t, "")
	agents["ag-3"].wantSteps(t, "append failed: run.interrupted+token.expired")
	ri := agents["ag-1"].recs[0].Data.(schema.RunInterruptedData)
	te := agents["ag-1"].recs[1].Data.(schema.TokenData)
	if ri.RunID != "run-1" || ri.Reason != schema.ReasonWaitTimeout || te.TokenID != due.ID || te.RunID != "run-1" {
		t.Fatalf("logged %+v and %+v", ri, te)
	}
	for tok, want := range map[token.Token]token.State{due: token.Expired, notYet: token.Live, failing: token.Live, gone: token.Expired} {
		if got, _ := w.Tokens.Get(tok.ID); got.State != want {
			t.Fatalf("token of %s is %s, want %s", tok.RunID, got.State, want)
		}
	}
}

// Revoke logs token.revoked with the reason and revokes the token; a token
// no longer live is left alone, and a failed write leaves it live.
func TestRevoke(t *testing.T) {
	w := newWaits(&clock{now: t0})
	tok, _, _ := token.Mint("ag-1", "run-1", t0.Add(time.Hour))
	if err := w.Tokens.Add(tok); err != nil {
		t.Fatal(err)
	}
	ag := newAgent(fold.Run{})
	ag.appendErr = errors.New("disk full")
	err := w.Revoke(ag, tok.ID, "run-1", schema.RevokeNewMessage)
	if err == nil || !strings.HasPrefix(err.Error(), "revoking token "+tok.ID+": ") || !errors.Is(err, ag.appendErr) {
		t.Fatalf("err %v", err)
	}
	if got, _ := w.Tokens.Get(tok.ID); got.State != token.Live {
		t.Fatalf("token %s after a failed revoke", got.State)
	}
	ag.appendErr = nil
	if err := w.Revoke(ag, tok.ID, "run-1", schema.RevokeNewMessage); err != nil {
		t.Fatal(err)
	}
	if d := ag.recs[0].Data.(schema.TokenData); d.TokenID != tok.ID || d.RunID != "run-1" || d.Reason != schema.RevokeNewMessage {
		t.Fatalf("logged %+v", d)
	}
	if got, _ := w.Tokens.Get(tok.ID); got.State != token.Revoked {
		t.Fatalf("token %s", got.State)
	}
	// Consumed: nothing to revoke, no error.
	tok2, sec2, _ := token.Mint("ag-1", "run-2", t0.Add(time.Hour))
	_ = w.Tokens.Add(tok2)
	if _, _, err := w.Tokens.Consume("ag-1", "run-2", sec2, "yes", t0, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Revoke(ag, tok2.ID, "run-2", schema.RevokeCancelled); err != nil {
		t.Fatalf("revoking a consumed token: %v", err)
	}
	ag.wantSteps(t, "append failed: token.revoked; append token.revoked")
}

// Each kind of refusal of package waits is the engine's domain error of
// that kind (package domainerr) with the refusal's text, so nothing maps
// it again before the RPC edge; a failed log write is a refusal only when
// the log refuses appends until it heals, other errors pass unchanged.
// (It tested the engine's waitErr, which mapped the package's own refusal
// type to the domain errors, until the package made them itself.)
func TestWaitErrMapsEachRefusal(t *testing.T) {
	cause := errors.New("the cause")
	for _, kind := range []error{domainerr.TokenRejected, domainerr.WrongState, domainerr.Unavailable} {
		err := refuse(kind, "refused: %w", cause)
		if !errors.Is(err, kind) || !errors.Is(err, cause) || err.Error() != "refused: the cause" || refusal(err) != kind {
			t.Fatalf("kind %v: %v", kind, err)
		}
	}
	poisoned := fmt.Errorf("%w: no space", eventlog.ErrPoisoned)
	if err := logFailure(poisoned); refusal(err) != domainerr.Unavailable || !errors.Is(err, poisoned) {
		t.Fatalf("a poisoned log: %v", err)
	}
	if err := logFailure(cause); err != cause {
		t.Fatalf("a plain error became %v", err)
	}
	if logFailure(nil) != nil {
		t.Fatal("nil became an error")
	}
}
