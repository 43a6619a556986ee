package waits

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/warren-dev/warren/engine/internal/domainerr"
	"github.com/warren-dev/warren/eventlog"
	fold "github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/token"
	"github.com/warren-dev/warren/tools"
)

// A running turn is cancelled and Cancel returns once it ended, with the
// error of an end that could not be logged; a caller that stops waiting
// gets its context's error.
func TestCancelStopsTheRunningTurn(t *testing.T) {
	w := newWaits(&clock{now: t0})
	ag := newAgent(fold.Run{RunID: "run-1"})
	done := make(chan struct{})
	cancelled := false
	ag.state.Turn = &Running{Cancel: func() { cancelled = true; close(done) }, Done: done}
	ag.owedErr = errors.New("the end is owed")
	if err := w.Cancel(context.Background(), ag); !cancelled || err != ag.owedErr {
		t.Fatalf("cancelled %v, err %v", cancelled, err)
	}

	ag.state.Turn = &Running{Cancel: func() {}, Done: make(chan struct{})}
	ctx, stop := context.WithCancel(context.Background())
	stop()
	if err := w.Cancel(ctx, ag); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	ag.wantSteps(t, "")
}

// Cancelling a wait revokes its token (token.revoked, reason cancelled)
// before turn.cancelled, under a claim released at the end; an open run
// without a live wait gets turn.cancelled alone.
func TestCancelEndsTheWaitOrTheRun(t *testing.T) {
	w := newWaits(&clock{now: t0})
	tok, _, _ := token.Mint("ag-1", "run-1", t0.Add(time.Hour))
	_ = w.Tokens.Add(tok)
	ag := newAgent(fold.Run{RunID: "run-1", Turn: 3, Wait: &fold.Wait{TokenID: tok.ID, TokenState: string(schema.TokLive)}})
	ag.state.LiveWait = true
	if err := w.Cancel(context.Background(), ag); err != nil {
		t.Fatal(err)
	}
	ag.wantSteps(t, "claim; append token.revoked; append turn.cancelled; cancelled waited=true; release")
	if d := ag.recs[0].Data.(schema.TokenData); d.Reason != schema.RevokeCancelled || d.TokenID != tok.ID {
		t.Fatalf("token.revoked %+v", d)
	}
	if d := ag.recs[1].Data.(schema.TurnCancelledData); d != (schema.TurnCancelledData{RunID: "run-1", Turn: 3}) {
		t.Fatalf("turn.cancelled %+v", d)
	}
	if got, _ := w.Tokens.Get(tok.ID); got.State != token.Revoked {
		t.Fatalf("token %s", got.State)
	}

	interrupted := newAgent(fold.Run{RunID: "run-2", Turn: 1, Interrupted: true, Reason: schema.ReasonProcessRestart})
	if err := w.Cancel(context.Background(), interrupted); err != nil {
		t.Fatal(err)
	}
	interrupted.wantSteps(t, "claim; append turn.cancelled; cancelled waited=false; release")
}

// With nothing to cancel, Cancel is refused (WrongState) before it claims;
// a refused claim comes back as it is.
func TestCancelRefusals(t *testing.T) {
	w := newWaits(&clock{now: t0})
	for _, run := range []fold.Run{{}, {RunID: "run-1", Ended: true}} {
		ag := newAgent(run)
		err := w.Cancel(context.Background(), ag)
		if refusal(err) != domainerr.WrongState || err.Error() != "agent root/worker has no running turn or wait to cancel" {
			t.Fatalf("run %+v: %v", run, err)
		}
		ag.wantSteps(t, "")
	}
	ag := newAgent(fold.Run{RunID: "run-1"})
	ag.claimErr = errors.New("terminated")
	if err := w.Cancel(context.Background(), ag); err != ag.claimErr {
		t.Fatalf("err %v", err)
	}
	ag.wantSteps(t, "claim")
}

// An owed run end is written instead of anything else; if it still cannot
// be, the owed error says so.
func TestCancelWritesTheOwedEnd(t *testing.T) {
	w := newWaits(&clock{now: t0})
	ag := newAgent(fold.Run{RunID: "run-1"})
	ag.state.LiveWait = true
	ag.owed = true
	if err := w.Cancel(context.Background(), ag); err != nil {
		t.Fatal(err)
	}
	ag.wantSteps(t, "claim; flush owed; release")
	ag.steps = nil
	ag.flushErr, ag.owedErr = errors.New("log full"), errors.New("still owed")
	if err := w.Cancel(context.Background(), ag); err != ag.owedErr {
		t.Fatalf("err %v", err)
	}
	ag.wantSteps(t, "claim; flush owed; release")
}

// A turn.cancelled that cannot be logged leaves the run open; a log that
// refuses appends until it heals makes that Unavailable.
func TestCancelThatCannotBeLogged(t *testing.T) {
	w := newWaits(&clock{now: t0})
	want := "logging turn.cancelled for agent root/worker: %v; the run is still open in the log and nothing else changed; retry agent cancel once the log accepts appends"
	for _, tc := range []struct {
		cause error
		kind  error
	}{
		{errors.New("disk full"), nil},
		{fmt.Errorf("%w: no space", eventlog.ErrPoisoned), domainerr.Unavailable},
	} {
		ag := newAgent(fold.Run{RunID: "run-1"})
		ag.appendErr = tc.cause
		err := w.Cancel(context.Background(), ag)
		if refusal(err) != tc.kind || !errors.Is(err, tc.cause) || err.Error() != fmt.Sprintf(want, tc.cause) {
			t.Fatalf("cause %v: %v (kind %v)", tc.cause, err, refusal(err))
		}
		ag.wantSteps(t, "claim; append failed: turn.cancelled; release")
	}
}

// The notices a wait's transitions owe are logged in the transition's
// write: busy -> waiting with run.waiting, waiting -> idle with the
// expiry and with a live wait's cancel (an interrupted run's cancel owes
// none: the agent was not waiting), each named by the run and its turn.
func TestWaitTransitionsOweTheirNoticesInTheirWrite(t *testing.T) {
	w := newWaits(&clock{now: t0})
	ag := newAgent(fold.Run{RunID: "run-1", Turn: 3})
	ag.watched = true
	if _, err := w.Begin(ag, tools.AwaitInput{Kind: "input", Timeout: time.Minute}, "run-1", 3); err != nil {
		t.Fatal(err)
	}
	ag.wantSteps(t, "append run.waiting+token.minted+notices.owed(busy->waiting run-1/3)")

	ag.steps = nil
	w.Now = func() time.Time { return t0.Add(2 * time.Minute) } // past the wait's deadline
	w.Sweep(func(string) (Agent[result], bool) { return ag, true })
	ag.wantSteps(t, "append run.interrupted+token.expired+notices.owed(waiting->idle run-1/3); expired")

	tok, _, _ := token.Mint("ag-1", "run-2", t0.Add(time.Hour))
	_ = w.Tokens.Add(tok)
	waiting := newAgent(fold.Run{RunID: "run-2", Turn: 2, Wait: &fold.Wait{TokenID: tok.ID, TokenState: string(schema.TokLive)}})
	waiting.state.LiveWait, waiting.watched = true, true
	if err := w.Cancel(context.Background(), waiting); err != nil {
		t.Fatal(err)
	}
	waiting.wantSteps(t, "claim; append token.revoked; append turn.cancelled+notices.owed(waiting->idle run-2/2); cancelled waited=true; release")

	interrupted := newAgent(fold.Run{RunID: "run-3", Turn: 1, Interrupted: true, Reason: schema.ReasonProcessRestart})
	interrupted.watched = true
	if err := w.Cancel(context.Background(), interrupted); err != nil {
		t.Fatal(err)
	}
	interrupted.wantSteps(t, "claim; append turn.cancelled; cancelled waited=false; release")
}
