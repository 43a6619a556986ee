package waits

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/warren-dev/warren/engine/internal/domainerr"
	fold "github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/token"
)

// waiting returns Waits and an agent whose run run-1 waits on a live
// token, and the token's client string.
func waiting(t *testing.T) (Waits[result], *fakeAgent, token.Token, string) {
	t.Helper()
	w := newWaits(&clock{now: t0})
	tok, secret, err := token.Mint("ag-1", "run-1", t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Tokens.Add(tok); err != nil {
		t.Fatal(err)
	}
	ag := newAgent(fold.Run{RunID: "run-1", Turn: 2, Prompt: "do it", Provider: "p",
		Wait: &fold.Wait{TokenID: tok.ID, TokenState: string(schema.TokLive)}})
	return w, ag, tok, secret
}

// A resume with the token lets the suspending turn settle, claims the
// agent and logs token.consumed and run.resumed in one write under the
// token's lock, then runs the turn again; a repeat while that turn runs
// starts nothing and gets its result.
func TestResumeRunsTheTurnOnceAndARepeatSharesItsResult(t *testing.T) {
	w, ag, tok, secret := waiting(t)
	ag.turns, ag.started = make(chan result), make(chan string, 1)
	first := make(chan result, 1)
	go func() {
		res, err := w.Resume(context.Background(), ag, Request{Presented: secret, Response: "yes"})
		if err != nil {
			t.Error(err)
		}
		first <- res
	}()
	<-ag.started
	repeat := make(chan result, 1)
	go func() {
		res, err := w.Resume(context.Background(), ag, Request{Presented: secret, Response: "yes"})
		if err != nil {
			t.Error(err)
		}
		repeat <- res
	}()
	want := result{"run-1", "idle", "answered"}
	ag.turns <- want
	if got := <-first; got != want {
		t.Fatalf("first resume: %+v", got)
	}
	if got := <-repeat; got != want {
		t.Fatalf("repeat: %+v", got)
	}
	ag.wantSteps(t, `claim; append token.consumed+run.resumed; start run-1 from "waiting"`)
	rr := ag.recs[1].Data.(schema.RunResumedData)
	if rr.RunID != "run-1" || rr.TokenID != tok.ID || rr.Response != "yes" {
		t.Fatalf("run.resumed %+v", rr)
	}
	// A repeat with another response is refused by the token service.
	_, err := w.Resume(context.Background(), ag, Request{Presented: secret, Response: "no"})
	if refusal(err) != domainerr.TokenRejected || !errors.Is(err, token.ErrConsumed) {
		t.Fatalf("repeat with another response: %v", err)
	}
}

// A repeat that gives up waiting for the first resume's turn gets its
// context's error.
func TestRepeatWaitsForTheFirstResultBoundedByItsContext(t *testing.T) {
	w, ag, _, secret := waiting(t)
	ag.turns, ag.started = make(chan result), make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = w.Resume(context.Background(), ag, Request{Presented: secret, Response: "yes"})
	}()
	<-ag.started
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := w.Resume(ctx, ag, Request{Presented: secret, Response: "yes"})
	if !errors.Is(err, context.Canceled) || res != (result{}) {
		t.Fatalf("repeat whose context ended: %+v, %v", res, err)
	}
	ag.turns <- result{}
	<-done
}

// After a restart (nothing shared in memory) a repeat is answered from
// the log when the run completed, finishes the run when the restart cut
// it off, and is refused when it ended without a result.
func TestRepeatAfterARestart(t *testing.T) {
	w, ag, tok, secret := waiting(t)
	if _, _, err := w.Tokens.Consume("ag-1", "run-1", secret, "yes", t0, nil); err != nil {
		t.Fatal(err)
	}
	ag.state.Run.Wait.TokenState = string(schema.TokConsumed)
	ag.state.Run.Ended = true
	ag.last = &fold.Resume{TokenID: tok.ID, RunID: "run-1", Result: "the answer", Completed: true}
	res, err := w.Resume(context.Background(), ag, Request{Presented: secret, Response: "yes"})
	if err != nil || res != (result{"run-1", "idle", "the answer"}) {
		t.Fatalf("repeat of a completed resume: %+v, %v", res, err)
	}
	ag.wantSteps(t, "")

	ag.last.Completed = false
	_, err = w.Resume(context.Background(), ag, Request{Presented: secret, Response: "yes"})
	if refusal(err) != domainerr.TokenRejected || err.Error() != "token rejected: "+tok.ID+" was consumed, and its run ended without a result" {
		t.Fatalf("repeat of a resume whose run ended without a result: %v", err)
	}

	ag.state.Run.Ended = false
	ag.state.Run.Interrupted, ag.state.Run.Reason = true, schema.ReasonProcessRestart
	ag.steps = nil
	res, err = w.Resume(context.Background(), ag, Request{Presented: secret, Response: "yes"})
	if err != nil || res != (result{"run-1", "idle", "done"}) {
		t.Fatalf("repeat of a resume a restart cut off: %+v, %v", res, err)
	}
	ag.wantSteps(t, `claim; append run.resumed; start run-1 from ""`)
}

// The token service's rejections are refusals (domainerr.TokenRejected)
// with its text; the agent's own errors (its claim, its log) come back as
// it gave them, wrapped by the token service, and leave the token live.
func TestResumeErrors(t *testing.T) {
	w, ag, tok, secret := waiting(t)
	wrong := tok.ID + "." + strings.Repeat("A", 43)
	_, err := w.Resume(context.Background(), ag, Request{Presented: wrong, Response: "yes"})
	if refusal(err) != domainerr.TokenRejected || !errors.Is(err, token.ErrWrongSecret) {
		t.Fatalf("wrong secret: %v", err)
	}

	claimErr := errors.New("agent ag-1 is mid-turn")
	ag.claimErr = claimErr
	_, err = w.Resume(context.Background(), ag, Request{Presented: secret, Response: "yes"})
	if refusal(err) != nil || !errors.Is(err, claimErr) || !strings.HasPrefix(err.Error(), "consume token "+tok.ID+": ") {
		t.Fatalf("claim refused: %v", err)
	}
	ag.claimErr = nil

	ag.appendErr = errors.New("disk full")
	ag.steps = nil
	_, err = w.Resume(context.Background(), ag, Request{Presented: secret, Response: "yes"})
	if refusal(err) != nil || !errors.Is(err, ag.appendErr) || !strings.HasSuffix(err.Error(), "logging the resume: disk full") {
		t.Fatalf("resume not logged: %v", err)
	}
	ag.wantSteps(t, "claim; append failed: token.consumed+run.resumed; unclaim")
	if got, _ := w.Tokens.Get(tok.ID); got.State != token.Live {
		t.Fatalf("token %s after failed resumes", got.State)
	}
	if _, live, _ := ag.resumes.Shared(context.Background(), tok.ID); live {
		t.Fatal("a resume that was not logged is shared")
	}
}

// Without a wait, only a repeat can succeed: an unknown or malformed
// token is refused before anything else happens.
func TestResumeWithoutAWait(t *testing.T) {
	w := newWaits(&clock{now: t0})
	ag := newAgent(fold.Run{RunID: "run-1", Ended: true})
	_, err := w.Resume(context.Background(), ag, Request{Presented: "nonsense", Response: "yes"})
	if refusal(err) != domainerr.TokenRejected || !errors.Is(err, token.ErrMalformed) {
		t.Fatalf("malformed: %v", err)
	}
	_, err = w.Resume(context.Background(), ag, Request{TokenID: "tok_0123456789abcdef", Response: "yes"})
	if refusal(err) != domainerr.TokenRejected || err.Error() != "token rejected: agent root/worker has no wait to resume" {
		t.Fatalf("unknown token: %v", err)
	}
	ag.wantSteps(t, "")
}

// By id (the operator) a wait is answered once: a repeat is refused.
func TestResumeByIDAnswersOnlyALiveWait(t *testing.T) {
	w, ag, tok, _ := waiting(t)
	res, err := w.Resume(context.Background(), ag, Request{TokenID: tok.ID, Response: "yes"})
	if err != nil || res != (result{"run-1", "idle", "done"}) {
		t.Fatalf("%+v, %v", res, err)
	}
	ag.busy = false
	_, err = w.Resume(context.Background(), ag, Request{TokenID: tok.ID, Response: "yes"})
	if refusal(err) != domainerr.TokenRejected || !errors.Is(err, token.ErrConsumed) {
		t.Fatalf("repeat by id: %v", err)
	}
}

// Without a token Resume re-runs a run a restart interrupted, and only
// such a run; a caller that stops waiting is told the run goes on.
func TestResumeReRunsAnInterruptedRun(t *testing.T) {
	w := newWaits(&clock{now: t0})
	ag := newAgent(fold.Run{RunID: "run-1", Turn: 4})
	_, err := w.Resume(context.Background(), ag, Request{})
	if refusal(err) != domainerr.WrongState || err.Error() != "agent root/worker has no interrupted run to resume; to answer a wait pass --token and a response" {
		t.Fatalf("not interrupted: %v", err)
	}
	ag.state.Run.Interrupted, ag.state.Run.Reason = true, schema.ReasonWaitTimeout
	if _, err := w.Resume(context.Background(), ag, Request{}); refusal(err) != domainerr.WrongState {
		t.Fatalf("interrupted by its deadline: %v", err)
	}
	ag.wantSteps(t, "")

	ag.state.Run.Reason = schema.ReasonProcessRestart
	ag.turns = make(chan result)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := w.Resume(ctx, ag, Request{})
	if err != nil || res != (result{"run-1", "running", ""}) {
		t.Fatalf("re-run the caller stopped waiting for: %+v, %v", res, err)
	}
	ag.wantSteps(t, `claim; append run.resumed; start run-1 from ""`)
	if d := ag.recs[0].Data.(schema.RunResumedData); d != (schema.RunResumedData{RunID: "run-1"}) {
		t.Fatalf("run.resumed %+v", d)
	}
	ag.turns <- result{}

	ag.steps, ag.busy = nil, false
	ag.appendErr = errors.New("disk full")
	if _, err := w.Resume(context.Background(), ag, Request{}); err == nil || err.Error() != "logging run.resumed: disk full" {
		t.Fatalf("re-run not logged: %v", err)
	}
	ag.wantSteps(t, "claim; append failed: run.resumed; release")
}

// A resume that comes while the turn that logged the wait still unwinds
// waits for that turn to end before it consumes the token, so it does not
// find the agent mid-turn; it stops waiting when its context ends.
func TestResumeLetsTheSuspendingTurnEndFirst(t *testing.T) {
	w, ag, _, secret := waiting(t)
	ag.state.Busy = true
	ag.state.Turn = &Running{RunID: "run-1", Cancel: func() {}, Done: make(chan struct{})}
	settling := make(chan struct{})
	ag.onState = func(n int) {
		if n == 2 { // Resume's own read, then settle's: it found the turn unwinding
			close(settling)
		}
	}
	out := make(chan error, 1)
	go func() {
		_, err := w.Resume(context.Background(), ag, Request{Presented: secret, Response: "yes"})
		out <- err
	}()
	select {
	case <-settling:
	case err := <-out:
		t.Fatalf("the resume went on while the turn unwound: %v", err)
	}
	ag.change(func(s *State) { s.Busy, s.Turn = false, nil }) // the turn ended and released the agent
	if err := <-out; err != nil {
		t.Fatal(err)
	}
	ag.wantSteps(t, `claim; append token.consumed+run.resumed; start run-1 from "waiting"`)

	// Another run's turn, or a run that no longer waits, is not waited for.
	for _, s := range []State{
		{Busy: true, Turn: &Running{RunID: "run-2"}, Run: fold.Run{RunID: "run-1", Wait: &fold.Wait{}}},
		{Busy: true, Turn: &Running{RunID: "run-1"}, Run: fold.Run{RunID: "run-1", Wait: &fold.Wait{}, Ended: true}},
		{Busy: true, Turn: &Running{RunID: "run-1"}, Run: fold.Run{RunID: "run-1"}},
		{Busy: true, Run: fold.Run{RunID: "run-1", Wait: &fold.Wait{}}},
		{Busy: false, Turn: &Running{RunID: "run-1"}, Run: fold.Run{RunID: "run-1", Wait: &fold.Wait{}}},
	} {
		if unwinding(s, "run-1") {
			t.Fatalf("unwinding: %+v", s)
		}
	}

	// Bounded by the context: it goes on, and finds the agent mid-turn.
	w, ag, _, secret = waiting(t)
	ag.state.Busy = true
	ag.state.Turn = &Running{RunID: "run-1"}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := w.Resume(ctx, ag, Request{Presented: secret, Response: "yes"}); err == nil || !strings.Contains(err.Error(), "mid-turn") {
		t.Fatalf("a resume that stopped waiting: %v", err)
	}
}
