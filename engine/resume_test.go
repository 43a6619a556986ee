package engine

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/warren-dev/warren/bus"
	"github.com/warren-dev/warren/faultfs"
	fold "github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/session"
	"github.com/warren-dev/warren/token"
)

// The tests of the former engine/internal/waits for resume.go (Resume,
// ResumeByID, the re-run, Cancel and the resumes bookkeeping), through a
// real Core.

// askThen is a program that asks (await_input) and, once answered, runs
// after (nil: nothing) and answers "answered: <response>". A turn that
// suspends returns at once.
func askThen(after func()) inproc.Program {
	return func(ctx context.Context, tr *inproc.Turn) (string, error) {
		r, err := tr.Call("await_input", map[string]any{"kind": "approval", "prompt": "ok?", "timeout": 3600})
		if err != nil {
			return "", err
		}
		if after != nil {
			after()
		}
		return "answered: " + r["response"].(string), nil
	}
}

// shownSecret reads events until a live run.waiting shows its resume
// secret (the client string), and returns it.
func shownSecret(t *testing.T, ch <-chan bus.Event) string {
	t.Helper()
	for ev := range ch {
		if ev.Entry.Event == schema.RunWaiting && ev.Token != "" {
			return ev.Token
		}
	}
	t.Fatal("the events ended before a wait was shown")
	return ""
}

// waitTokenID is the token id of agent id's latest wait.
func waitTokenID(t *testing.T, h *harness, id string) string {
	t.Helper()
	return dataAs[schema.RunWaitingData](t, lastEntry(t, h, id, schema.RunWaiting)).TokenID
}

// isBusy reports whether the agent is claimed (busy).
func isBusy(a *agent) bool { return look(a, func(_ *projection, l liveFlags) bool { return l.Busy }) }

// A resume with the token lets the suspending turn settle, claims the
// agent and logs token.consumed and run.resumed in one write under the
// token's lock, then runs the turn again; a repeat while that turn runs
// starts nothing and gets its result.
func TestResumeRunsTheTurnOnceAndARepeatSharesItsResult(t *testing.T) {
	lw := &groupWrites{}
	h := newHarness(t, recordWrites(lw), func(h *harness) { h.noWake = true })
	var runs atomic.Int32
	started, release := make(chan struct{}), make(chan struct{})
	h.prov.Register("ask", func(ctx context.Context, tr *inproc.Turn) (string, error) {
		runs.Add(1)
		return askThen(func() { started <- struct{}{}; <-release })(ctx, tr)
	})
	boss := h.create("boss", "", "echo")
	id := h.create("lead", boss, "ask")
	// boss watches lead: the resumed turn's start says where it came from.
	if r := h.tool(boss, "subscribe", map[string]any{"agent_name": "lead", "transition": "*->*"}); r["status"] != "active" {
		t.Fatalf("subscribe = %v", r)
	}
	res := h.send(id, "go")
	tokID := waitTokenID(t, h, id)
	first := make(chan TurnResult, 1)
	go func() {
		out, err := h.c.Resume(context.Background(), id, res.Token, "yes")
		if err != nil {
			t.Error(err)
		}
		first <- out
	}()
	<-started // the resumed turn runs
	probe := newProbeCtx()
	repeat := make(chan TurnResult, 1)
	go func() {
		out, err := h.c.Resume(probe, id, res.Token, "yes")
		if err != nil {
			t.Error(err)
		}
		repeat <- out
	}()
	select {
	case <-probe.asked: // the repeat waits for the first resume's turn
	case out := <-repeat:
		t.Fatalf("the repeat returned while the first resume's turn ran: %+v", out)
	}
	close(release)
	got1 := <-first
	want := TurnResult{RunID: res.RunID, Status: session.StatusIdle, Response: "answered: yes",
		ResponseSeq: lastEntry(t, h, id, schema.TurnComplete).Seq}
	if got := got1; !reflect.DeepEqual(got, want) {
		t.Fatalf("first resume: %+v, want %+v", got, want)
	}
	if got := <-repeat; !reflect.DeepEqual(got, want) {
		t.Fatalf("repeat: %+v, want %+v", got, want)
	}
	if n := runs.Load(); n != 2 {
		t.Fatalf("the program ran %d times, want 2 (the suspended turn, the resumed one)", n)
	}
	for ev, want := range map[string]int{schema.TurnStart: 2, schema.TurnComplete: 1, schema.TokenConsumed: 1, schema.RunResumed: 1} {
		if n := h.count(id, ev); n != want {
			t.Fatalf("%s logged %d times, want %d", ev, n, want)
		}
	}
	hasWrite(t, lw, id, "token.consumed+run.resumed")
	if rr := dataAs[schema.RunResumedData](t, lastEntry(t, h, id, schema.RunResumed)); rr != (schema.RunResumedData{RunID: res.RunID, TokenID: tokID, Response: "yes", By: schema.ByOperator}) {
		t.Fatalf("run.resumed %+v", rr)
	}
	if !writesFollow(lw.of(id), "token.consumed+run.resumed", "turn.start+notices.owed") {
		t.Fatalf("writes %q: want the resumed turn's start with the notices it owes", lw.of(id))
	}
	var n schema.NoticesOwedData
	es := h.entries(id)
	for i, e := range es {
		if e.Event == schema.RunResumed && i+2 < len(es) && es[i+2].Event == schema.NoticesOwed {
			n = dataAs[schema.NoticesOwedData](t, es[i+2])
		}
	}
	if n.From != schema.StateWaiting || n.To != schema.StateBusy || n.Key != res.RunID+"/1" {
		t.Fatalf("the resumed turn's start owes %+v; want waiting -> busy of the run's turn", n)
	}
	// A repeat with another response is refused by the token service.
	_, err := h.c.Resume(context.Background(), id, res.Token, "no")
	if !errors.Is(err, ErrTokenRejected) || !errors.Is(err, token.ErrConsumed) {
		t.Fatalf("repeat with another response: %v", err)
	}
}

// A repeat that gives up waiting for the first resume's turn gets its
// context's error.
func TestRepeatWaitsForTheFirstResultBoundedByItsContext(t *testing.T) {
	h := newHarness(t)
	started, release := make(chan struct{}), make(chan struct{})
	h.prov.Register("ask", askThen(func() { started <- struct{}{}; <-release }))
	id := h.create("lead", "", "ask")
	res := h.send(id, "go")
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = h.c.Resume(context.Background(), id, res.Token, "yes")
	}()
	<-started
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out, err := h.c.Resume(ctx, id, res.Token, "yes")
	if !errors.Is(err, context.Canceled) || !reflect.DeepEqual(out, TurnResult{}) {
		t.Fatalf("repeat whose context ended: %+v, %v", out, err)
	}
	close(release)
	<-done
	if n := h.count(id, schema.TurnComplete); n != 1 {
		t.Fatalf("turn.complete x%d, want 1", n)
	}
}

// After a restart (nothing shared in memory) a repeat is answered from
// the log when the run completed, finishes the run when the restart cut
// it off, and is refused when it ended without a result.
func TestRepeatAfterARestart(t *testing.T) {
	lw := &groupWrites{}
	h := newHarness(t, recordWrites(lw))
	h.prov.Register("ask", askThen(nil))
	h.prov.Register("ask-fail", func(ctx context.Context, tr *inproc.Turn) (string, error) {
		if _, err := tr.Call("await_input", map[string]any{"kind": "approval", "prompt": "ok?", "timeout": 3600}); err != nil {
			return "", err
		}
		return "", provider.Permanent(errors.New("no result"))
	})
	var hold atomic.Bool
	hold.Store(true)
	started, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	h.prov.Register("ask-cut", askThen(func() {
		if hold.Swap(false) {
			started <- struct{}{}
			<-release
		}
	}))
	completed := h.create("completed", "", "ask")
	failed := h.create("failed", "", "ask-fail")
	cut := h.create("cut", "", "ask-cut")
	resOf := map[string]TurnResult{}
	for _, id := range []string{completed, failed, cut} {
		resOf[id] = h.send(id, "go")
	}
	if out, err := h.c.Resume(context.Background(), completed, resOf[completed].Token, "yes"); err != nil || out.Response != "answered: yes" {
		t.Fatalf("resume: %+v, %v", out, err)
	}
	if out, err := h.c.Resume(context.Background(), failed, resOf[failed].Token, "yes"); err != nil || out.Err == nil {
		t.Fatalf("resume of the run that fails: %+v, %v", out, err)
	}
	go func() { _, _ = h.c.Resume(context.Background(), cut, resOf[cut].Token, "yes") }()
	<-started
	h.crash(faultfs.ProcessCrash)

	before := len(h.entries(completed))
	out, err := h.c.Resume(context.Background(), completed, resOf[completed].Token, "yes")
	if want := (TurnResult{RunID: resOf[completed].RunID, Status: session.StatusIdle, Response: "answered: yes"}); err != nil || !reflect.DeepEqual(out, want) {
		t.Fatalf("repeat of a completed resume: %+v, %v; want %+v", out, err, want)
	}
	if n := len(h.entries(completed)); n != before {
		t.Fatalf("the repeat of a completed resume logged %d entries", n-before)
	}

	tokID := waitTokenID(t, h, failed)
	before = len(h.entries(failed))
	_, err = h.c.Resume(context.Background(), failed, resOf[failed].Token, "yes")
	if !errors.Is(err, ErrTokenRejected) || err.Error() != "token rejected: "+tokID+" was consumed, and its run ended without a result" {
		t.Fatalf("repeat of a resume whose run ended without a result: %v", err)
	}
	if n := len(h.entries(failed)); n != before {
		t.Fatalf("a refused repeat logged %d entries", n-before)
	}

	runID := resOf[cut].RunID
	if ri := dataAs[schema.RunInterruptedData](t, lastEntry(t, h, cut, schema.RunInterrupted)); ri.Reason != schema.ReasonProcessRestart || ri.RunID != runID {
		t.Fatalf("the restart logged %+v", ri)
	}
	out, err = h.c.Resume(context.Background(), cut, resOf[cut].Token, "yes")
	if want := (TurnResult{RunID: runID, Status: session.StatusIdle, Response: "answered: yes",
		ResponseSeq: lastEntry(t, h, cut, schema.TurnComplete).Seq}); err != nil || !reflect.DeepEqual(out, want) {
		t.Fatalf("repeat of a resume a restart cut off: %+v, %v; want %+v", out, err, want)
	}
	if !writesFollow(lw.of(cut), "run.interrupted", "run.resumed", "turn.start") {
		t.Fatalf("writes of the cut run's log %q; want, after the restart's run.interrupted, run.resumed alone, then the turn", lw.of(cut))
	}
	if rr := dataAs[schema.RunResumedData](t, lastEntry(t, h, cut, schema.RunResumed)); rr != (schema.RunResumedData{RunID: runID, By: schema.ByOperator}) {
		t.Fatalf("the re-run's run.resumed %+v, want the run alone", rr)
	}
	if n := h.count(cut, schema.TokenConsumed); n != 1 {
		t.Fatalf("token.consumed x%d, want 1", n)
	}
}

// The token service's rejections are refusals (ErrTokenRejected) with its
// text; the agent's own errors (its claim, its log) come back as it gave
// them, wrapped by the token service, and leave the token live.
func TestResumeErrors(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.healBackoff = -1 })
	unwinding, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	h.prov.Register("ask", func(ctx context.Context, tr *inproc.Turn) (string, error) {
		r, err := tr.Call("await_input", map[string]any{"kind": "approval", "prompt": "ok?", "timeout": 3600})
		if err != nil {
			once.Do(func() { unwinding <- struct{}{}; <-release }) // the suspending turn is slow to end
			return "", err
		}
		return "answered: " + r["response"].(string), nil
	})
	id := h.create("lead", "", "ask")
	shown, unsubscribe := h.c.bus.Subscribe(id)
	defer unsubscribe()
	sent := make(chan TurnResult, 1)
	go func() { res, _ := h.c.Send(context.Background(), id, "go", "", "", nil); sent <- res }()
	<-unwinding
	secret := shownSecret(t, shown)
	tokID := waitTokenID(t, h, id)
	a := mustAgent(t, h.c, id)

	// The claim refused: the suspending turn still runs, and this resume
	// does not wait for it (its context ended).
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := h.c.Resume(ctx, id, secret, "yes")
	if !errors.Is(err, ErrWrongState) || !strings.Contains(err.Error(), "mid-turn") || !strings.HasPrefix(err.Error(), "consume token "+tokID+": ") {
		t.Fatalf("claim refused: %v", err)
	}
	errIsNot(t, err, ErrTokenRejected)
	close(release)
	<-sent
	h.quiet()

	wrong := tokID + "." + strings.Repeat("A", 43)
	if _, err := h.c.Resume(context.Background(), id, wrong, "yes"); !errors.Is(err, ErrTokenRejected) || !errors.Is(err, token.ErrWrongSecret) {
		t.Fatalf("wrong secret: %v", err)
	}

	h.fs.Inject(faultfs.Rule{Kind: faultfs.OpWrite, Path: id + "/events.jsonl", Err: syscall.ENOSPC, Sticky: true})
	_, err = h.c.Resume(context.Background(), id, secret, "yes")
	if !errors.Is(err, syscall.ENOSPC) || !strings.HasPrefix(err.Error(), "consume token "+tokID+": ") || !strings.Contains(err.Error(), "logging the resume: ") {
		t.Fatalf("resume not logged: %v", err)
	}
	errIsNot(t, err, ErrTokenRejected)
	if isBusy(a) {
		t.Fatal("the agent is still claimed after a resume that was not logged")
	}
	if got, _ := h.c.tokens.Get(tokID); got.State != token.Live {
		t.Fatalf("token %s after failed resumes", got.State)
	}
	if _, live, _ := a.Resumes().Shared(context.Background(), tokID); live {
		t.Fatal("a resume that was not logged is shared")
	}
	h.fs.ClearRules()
	if n := h.count(id, schema.TokenConsumed) + h.count(id, schema.RunResumed); n != 0 {
		t.Fatalf("%d resume entries logged by failed resumes", n)
	}
	if out, err := h.c.Resume(context.Background(), id, secret, "yes"); err != nil || out.Response != "answered: yes" {
		t.Fatalf("resume once the log takes it: %+v, %v", out, err)
	}
}

// Without a wait, only a repeat can succeed: an unknown or malformed
// token is refused before anything else happens.
func TestResumeWithoutAWait(t *testing.T) {
	h := newHarness(t)
	ended := h.create("lead", "", "echo")
	h.send(ended, "hi")
	fresh := h.create("fresh", "", "echo")
	for id, name := range map[string]string{ended: "lead", fresh: "fresh"} {
		before := len(h.entries(id))
		_, err := h.c.Resume(context.Background(), id, "nonsense", "yes")
		if !errors.Is(err, ErrTokenRejected) || !errors.Is(err, token.ErrMalformed) {
			t.Fatalf("%s: malformed: %v", name, err)
		}
		_, err = h.c.ResumeByID(context.Background(), id, "tok_0123456789abcdef", "yes")
		if !errors.Is(err, ErrTokenRejected) || err.Error() != "token rejected: agent "+name+" has no wait to resume" {
			t.Fatalf("%s: unknown token: %v", name, err)
		}
		if n := len(h.entries(id)); n != before {
			t.Fatalf("%s: refused resumes logged %d entries", name, n-before)
		}
	}
}

// By id (the operator) a wait is answered once: a repeat is refused.
func TestResumeByIDAnswersOnlyALiveWait(t *testing.T) {
	h := newHarness(t)
	h.prov.Register("ask", askThen(nil))
	id := h.create("lead", "", "ask")
	res := h.send(id, "go")
	tokID := waitTokenID(t, h, id)
	out, err := h.c.ResumeByID(context.Background(), id, tokID, "yes")
	if want := (TurnResult{RunID: res.RunID, Status: session.StatusIdle, Response: "answered: yes",
		ResponseSeq: lastEntry(t, h, id, schema.TurnComplete).Seq}); err != nil || !reflect.DeepEqual(out, want) {
		t.Fatalf("%+v, %v; want %+v", out, err, want)
	}
	_, err = h.c.ResumeByID(context.Background(), id, tokID, "yes")
	if !errors.Is(err, ErrTokenRejected) || !errors.Is(err, token.ErrConsumed) {
		t.Fatalf("repeat by id: %v", err)
	}
	if n := h.count(id, schema.TurnComplete); n != 1 {
		t.Fatalf("turn.complete x%d, want 1", n)
	}
}

// Without a token Resume re-runs a run a restart interrupted, and only an
// interrupted run (a timed-out wait is one too:
// TestTimedOutWaitIsReRunWithTheTimeout); a caller that stops waiting is
// told the run goes on.
func TestResumeReRunsAnInterruptedRun(t *testing.T) {
	lw := &groupWrites{}
	h := newHarness(t, withFakeClock, recordWrites(lw), func(h *harness) { h.healBackoff = -1 })
	h.prov.Register("ask", asker(60))
	started, release := make(chan struct{}), make(chan struct{})
	releaseAll := sync.OnceFunc(func() { close(release) })
	defer releaseAll()
	h.prov.Register("work", held(started, release, inproc.Echo))
	fresh := h.create("fresh", "", "echo")
	waiting := h.create("waiting", "", "ask")
	h.send(waiting, "go")
	h.clock.Advance(time.Minute + time.Second) // the wait times out...
	if n := h.count(waiting, schema.TokenExpired); n != 1 {
		t.Fatalf("token.expired x%d", n)
	}
	h.send(waiting, "again") // ... and the agent waits again
	worker := h.create("worker", "", "work")
	busyAgent(h, worker, started)
	h.crash(faultfs.ProcessCrash)

	for id, name := range map[string]string{fresh: "fresh", waiting: "waiting"} {
		before := len(h.entries(id))
		_, err := h.c.Resume(context.Background(), id, "", "")
		if !errors.Is(err, ErrWrongState) || err.Error() != "agent "+name+" has no interrupted run to resume; to answer a wait pass --token and a response" {
			t.Fatalf("%s: %v", name, err)
		}
		if n := len(h.entries(id)); n != before {
			t.Fatalf("%s: a refused re-run logged %d entries", name, n-before)
		}
	}

	runID := runOf(lastEntry(t, h, worker, schema.TurnStart))
	if ri := dataAs[schema.RunInterruptedData](t, lastEntry(t, h, worker, schema.RunInterrupted)); ri.Reason != schema.ReasonProcessRestart {
		t.Fatalf("the restart logged %+v", ri)
	}
	h.fs.Inject(faultfs.Rule{Kind: faultfs.OpWrite, Path: worker + "/events.jsonl", Err: syscall.ENOSPC, Sticky: true})
	_, err := h.c.Resume(context.Background(), worker, "", "")
	if err == nil || !strings.HasPrefix(err.Error(), "logging run.resumed: ") || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("re-run not logged: %v", err)
	}
	if isBusy(mustAgent(t, h.c, worker)) {
		t.Fatal("the agent is still claimed after a re-run that was not logged")
	}
	h.fs.ClearRules()
	if n := h.count(worker, schema.RunResumed); n != 0 {
		t.Fatalf("run.resumed x%d after a failed re-run", n)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out, err := h.c.Resume(ctx, worker, "", "")
	if want := (TurnResult{RunID: runID, Status: "running"}); err != nil || !reflect.DeepEqual(out, want) {
		t.Fatalf("re-run the caller stopped waiting for: %+v, %v; want %+v", out, err, want)
	}
	<-started // the re-run's turn runs on
	if !writesFollow(lw.of(worker), "run.interrupted", "run.resumed", "turn.start") {
		t.Fatalf("writes %q; want, after the restart's run.interrupted, run.resumed alone, then the turn", lw.of(worker))
	}
	if rr := dataAs[schema.RunResumedData](t, lastEntry(t, h, worker, schema.RunResumed)); rr != (schema.RunResumedData{RunID: runID, By: schema.ByOperator}) {
		t.Fatalf("run.resumed %+v", rr)
	}
	releaseAll() // the turn cut off by the crash, and the re-run
	h.until("the re-run completed", func() bool { return h.count(worker, schema.TurnComplete) == 1 })
}

// A resume that comes while the turn that logged the wait still unwinds
// waits for that turn to end before it consumes the token, so it does not
// find the agent mid-turn; it stops waiting when its context ends.
func TestResumeLetsTheSuspendingTurnEndFirst(t *testing.T) {
	h := newHarness(t)
	unwound, release := make(chan struct{}), make(chan struct{})
	h.prov.Register("ask", func(ctx context.Context, tr *inproc.Turn) (string, error) {
		r, err := tr.Call("await_input", map[string]any{"kind": "approval", "prompt": "ok?", "timeout": 3600})
		if err != nil {
			unwound <- struct{}{}
			<-release
			return "", err
		}
		return "answered: " + r["response"].(string), nil
	})
	for _, name := range []string{"lead", "impatient"} {
		id := h.create(name, "", "ask")
		shown, unsubscribe := h.c.bus.Subscribe(id)
		go func() { _, _ = h.c.Send(context.Background(), id, "go", "", "", nil) }()
		<-unwound
		secret := shownSecret(t, shown)
		unsubscribe()
		if name == "impatient" {
			// Bounded by the context: it goes on, and finds the agent
			// mid-turn.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if _, err := h.c.Resume(ctx, id, secret, "yes"); err == nil || !strings.Contains(err.Error(), "mid-turn") {
				t.Fatalf("a resume that stopped waiting: %v", err)
			}
			release <- struct{}{}
			break
		}
		probe := newProbeCtx()
		out := make(chan error, 1)
		go func() {
			res, err := h.c.Resume(probe, id, secret, "yes")
			if err == nil && res.Response != "answered: yes" {
				err = fmt.Errorf("result %+v", res)
			}
			out <- err
		}()
		select {
		case <-probe.asked:
		case err := <-out:
			t.Fatalf("the resume went on while the turn unwound: %v", err)
		}
		release <- struct{}{} // the turn ends and releases the agent
		if err := <-out; err != nil {
			t.Fatal(err)
		}
	}
	h.quiet()

	// Another run's turn, or a run that no longer waits, is not waited for.
	for _, s := range []waitState{
		{Busy: true, Turn: &turnRef{RunID: "run-2"}, Run: fold.Run{RunID: "run-1", Wait: &fold.Wait{}}},
		{Busy: true, Turn: &turnRef{RunID: "run-1"}, Run: fold.Run{RunID: "run-1", Wait: &fold.Wait{}, Ended: true}},
		{Busy: true, Turn: &turnRef{RunID: "run-1"}, Run: fold.Run{RunID: "run-1"}},
		{Busy: true, Run: fold.Run{RunID: "run-1", Wait: &fold.Wait{}}},
		{Busy: false, Turn: &turnRef{RunID: "run-1"}, Run: fold.Run{RunID: "run-1", Wait: &fold.Wait{}}},
	} {
		if unwinding(s, "run-1") {
			t.Fatalf("unwinding: %+v", s)
		}
	}
	if !unwinding(waitState{Busy: true, Turn: &turnRef{RunID: "run-1"}, Run: fold.Run{RunID: "run-1", Wait: &fold.Wait{}}}, "run-1") {
		t.Fatal("the turn that logged the wait is not seen unwinding")
	}
}

// The notices a wait's transitions owe are logged in the transition's
// write: busy -> waiting with run.waiting, waiting -> idle with the
// expiry and with a live wait's cancel (an interrupted run's cancel owes
// none: the agent was not waiting), each named by the run and its turn.
func TestWaitTransitionsOweTheirNoticesInTheirWrite(t *testing.T) {
	lw := &groupWrites{}
	h := newHarness(t, withFakeClock, recordWrites(lw), func(h *harness) { h.noWake = true })
	h.prov.Register("soon", asker(60))
	h.prov.Register("later", asker(3600))
	started, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	h.prov.Register("work", held(started, release, inproc.Echo))
	root := h.create("root", "", "echo")
	expiring := h.create("expiring", root, "soon")
	cancelled := h.create("cancelled", root, "later")
	interrupted := h.create("interrupted", root, "work")
	for _, name := range []string{"expiring", "cancelled", "interrupted"} {
		if r := h.tool(root, "subscribe", map[string]any{"agent_name": name, "transition": "*->*"}); r["status"] != "active" {
			t.Fatalf("subscribe to %s: %v", name, r)
		}
	}
	owed := func(id string) schema.NoticesOwedData {
		return dataAs[schema.NoticesOwedData](t, lastEntry(t, h, id, schema.NoticesOwed))
	}
	key := func(id string) string {
		rw := dataAs[schema.RunWaitingData](t, lastEntry(t, h, id, schema.RunWaiting))
		return fmt.Sprintf("%s/%d", rw.RunID, rw.Turn)
	}

	h.send(expiring, "go")
	hasWrite(t, lw, expiring, "run.waiting+token.minted+notices.owed")
	if n := owed(expiring); n.From != schema.StateBusy || n.To != schema.StateWaiting || n.Key != key(expiring) || len(n.Subscriptions) != 1 {
		t.Fatalf("notices owed by busy -> waiting: %+v", n)
	}
	h.clock.Advance(2 * time.Minute) // past the wait's deadline
	hasWrite(t, lw, expiring, "run.interrupted+token.expired+notices.owed")
	if n := owed(expiring); n.From != schema.StateWaiting || n.To != schema.StateIdle || n.Key != key(expiring) {
		t.Fatalf("notices owed by the expiry: %+v", n)
	}

	h.send(cancelled, "go")
	busyAgent(h, interrupted, started)
	h.crash(faultfs.ProcessCrash)
	if err := h.c.Cancel(context.Background(), cancelled); err != nil {
		t.Fatal(err)
	}
	ws := lw.of(cancelled)
	if got := strings.Join(ws[len(ws)-2:], " "); got != "token.revoked turn.cancelled+notices.owed" {
		t.Fatalf("the cancel of a wait wrote %q", got)
	}
	if n := owed(cancelled); n.From != schema.StateWaiting || n.To != schema.StateIdle || n.Key != key(cancelled) {
		t.Fatalf("notices owed by the cancel: %+v", n)
	}
	before := h.count(interrupted, schema.NoticesOwed)
	if err := h.c.Cancel(context.Background(), interrupted); err != nil {
		t.Fatal(err)
	}
	if ws := lw.of(interrupted); ws[len(ws)-1] != "turn.cancelled" || h.count(interrupted, schema.NoticesOwed) != before {
		t.Fatalf("the cancel of an interrupted run wrote %q", ws)
	}
}

// The zero resumes keeps a secret per run until it is taken or dropped.
func TestResumesSecrets(t *testing.T) {
	var r resumes
	if r.Secret("run-1") != "" || r.Take("run-1") != "" {
		t.Fatal("a zero resumes holds a secret")
	}
	r.Drop("run-1") // nothing to drop: no effect
	r.Mint("run-1", "s1")
	r.Mint("run-2", "s2")
	if r.Secret("run-1") != "s1" || r.Secret("run-1") != "s1" {
		t.Fatal("Secret does not keep the secret")
	}
	r.Drop("run-2")
	if r.Secret("run-2") != "" {
		t.Fatal("a dropped secret is kept")
	}
	if r.Take("run-1") != "s1" || r.Take("run-1") != "" || r.Secret("run-1") != "" {
		t.Fatal("a secret is handed out more than once")
	}
}

// Every repeat of a resume, however many and whenever they come, gets the
// result the first resume's turn finished with; a resume this process
// never ran is not shared.
func TestResumesShareTheFirstResult(t *testing.T) {
	var r resumes
	if _, live, _ := r.Shared(context.Background(), "tok"); live {
		t.Fatal("a resume that never ran is shared")
	}
	r.Open("tok")
	want := TurnResult{RunID: "run-1", Status: session.StatusIdle, Response: "42"}
	var wg sync.WaitGroup
	got := make([]TurnResult, 8)
	for i := range got {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			res, live, err := r.Shared(context.Background(), "tok")
			if !live || err != nil {
				t.Errorf("live %v, err %v", live, err)
			}
			got[i] = res
		}(i)
	}
	r.Finish("tok", want)
	wg.Wait()
	for i, res := range got {
		if !reflect.DeepEqual(res, want) {
			t.Fatalf("repeat %d got %+v", i, res)
		}
	}
	if res, live, err := r.Shared(context.Background(), "tok"); !reflect.DeepEqual(res, want) || !live || err != nil {
		t.Fatalf("a repeat after the result: %+v, %v, %v", res, live, err)
	}
	r.Finish("tok", want) // a second Finish does not close twice
}

// A repeat stops waiting when its context ends, with the context's error.
func TestResumesSharedBoundedByContext(t *testing.T) {
	var r resumes
	r.Open("tok")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, live, err := r.Shared(ctx, "tok")
	if !reflect.DeepEqual(res, TurnResult{}) || !live || !errors.Is(err, context.Canceled) {
		t.Fatalf("%+v, %v, %v", res, live, err)
	}
}
