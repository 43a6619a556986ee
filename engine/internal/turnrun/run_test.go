package turnrun

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/warren-dev/warren/engine/internal/domainerr"
	"github.com/warren-dev/warren/engine/internal/views"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/history"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/session"
)

func TestChoosePicksTheProviderModelAndRun(t *testing.T) {
	s := Settings{Provider: "p1", Model: "m1", TurnNo: 7}
	def := func(p string) string { return p + "-default" }
	ids := func() string { return "new-run" }
	for _, tc := range []struct {
		name string
		req  Request
		want Turn
	}{
		{"the agent's own", Request{}, Turn{RunID: "new-run", Turn: 8, Provider: "p1", Model: "m1"}},
		{"its provider, another model", Request{Provider: "p1", Model: "m2"}, Turn{RunID: "new-run", Turn: 8, Provider: "p1", Model: "m2"}},
		{"another provider: its default model", Request{Provider: "p2"}, Turn{RunID: "new-run", Turn: 8, Provider: "p2", Model: "p2-default"}},
		{"another provider and model", Request{Provider: "p2", Model: "x"}, Turn{RunID: "new-run", Turn: 8, Provider: "p2", Model: "x"}},
		{"a re-run", Request{RunID: "old", Turn: 3}, Turn{RunID: "old", Turn: 3, Provider: "p1", Model: "m1", Rerun: true}},
	} {
		if got := Choose(tc.req, s, def, ids); got != tc.want {
			t.Errorf("%s: Choose = %+v; want %+v", tc.name, got, tc.want)
		}
	}
	if got := Choose(Request{}, Settings{Provider: "p1"}, def, ids); got.Model != "p1-default" {
		t.Errorf("an agent with no model of its own: model %q; want the provider's default", got.Model)
	}
}

func TestCompleteTurnStepsInOrder(t *testing.T) {
	f := newFake()
	f.sends = append(f.sends, func(_ context.Context, _ string, io provider.TurnIO) (string, error) {
		io.OnChunk("he")
		io.OnUsage(provider.Usage{InputTokens: 3})
		io.OnUsage(provider.Usage{InputTokens: 4})
		return "hello", nil
	})
	var chunks []string
	ran := false
	f.deferred = []func(){func() { ran = true }}
	c := &clock{}
	res := newRunner(c).Run(context.Background(), f, Request{Prompt: "hi", MessageIDs: []string{"m-1"},
		OnChunk: func(s string) { chunks = append(chunks, s) }})
	wantSteps(t, f, "begin", "provider inproc", "flush-owed", "append turn.start", "save running", "notify",
		"acquire inproc/m1", "policy", "tools run-1/5", "open", `send "hi"`, `delta run-1 "he"`, "close", "drain", "injected",
		"end discard=false", "append turn.complete",
		"ended", "live-wait", "save idle", "rest held=false", "checkpoint", "notify", "wake", "settled", "changed")
	if res.Err != nil || res.Response != "hello" || res.Status != "idle" || res.RunID != "run-1" {
		t.Fatalf("result %+v; want hello, idle, run-1", res)
	}
	if !ran || len(chunks) != 1 {
		t.Errorf("deferred work ran %v, chunks %q; want it run and one chunk", ran, chunks)
	}
	start := f.recs[0].data.(schema.TurnStartData)
	if start.RunID != "run-1" || start.Turn != 5 || start.BootID != "boot-1" || start.Provider != "inproc" ||
		start.Model != "m1" || start.Prompt != "hi" || len(start.MessageIDs) != 1 {
		t.Errorf("turn.start %+v", start)
	}
	done := f.recs[1].data.(schema.TurnCompleteData)
	if done.Response != "hello" || done.Usage == nil || done.Usage.InputTokens != 7 {
		t.Errorf("turn.complete %+v; want the response and the usage summed", done)
	}
	if run := f.saved[0].Run; run == nil || run.RunID != "run-1" || run.BootID != "boot-1" || !run.StartedAt.Equal(t0) {
		t.Errorf("session.json while running: %+v", run)
	}
	if f.saved[1].Run != nil {
		t.Errorf("session.json after the turn keeps run %+v; want none", f.saved[1].Run)
	}
	if c.reads != 1 {
		t.Errorf("%d clock reads; want 1 (the run's start)", c.reads)
	}
}

func TestTurnStartWithoutMessagesLogsAnEmptyList(t *testing.T) {
	f := newFake()
	f.sends = append(f.sends, answer("ok"))
	newRunner(&clock{}).Run(context.Background(), f, Request{Prompt: "hi"})
	if ids := f.recs[0].data.(schema.TurnStartData).MessageIDs; ids == nil {
		t.Error("turn.start message_ids is nil; want an empty list")
	}
}

func TestTransientErrorRetriesThenCompletes(t *testing.T) {
	f := newFake()
	f.sends = append(f.sends, fail(provider.Transient(errors.New("overloaded"), 0)), answer("ok"))
	var slept []time.Duration
	f.policy.Sleep = func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil }
	var notes []RetryNotice
	res := newRunner(&clock{}).Run(context.Background(), f, Request{Prompt: "hi",
		OnRetry: func(n RetryNotice) { notes = append(notes, n) }})
	if res.Err != nil || res.Response != "ok" {
		t.Fatalf("result %+v; want ok", res)
	}
	if f.recs[1].event != schema.TurnRetry {
		t.Fatalf("second entry %s; want turn.retry", f.recs[1].event)
	}
	rd := f.recs[1].data.(schema.TurnRetryData)
	if rd.Attempt != 1 || rd.DelayMS != 10 || !strings.Contains(rd.Error, "overloaded") {
		t.Errorf("turn.retry %+v; want attempt 1, 10 ms", rd)
	}
	if len(notes) != 1 || notes[0].MaxRetries != 2 || notes[0].Delay != 10*time.Millisecond || notes[0].RunID != "run-1" {
		t.Errorf("notices %+v", notes)
	}
	if len(slept) != 1 || slept[0] != 10*time.Millisecond {
		t.Errorf("slept %v; want 10ms once", slept)
	}
	if f.nsend != 2 {
		t.Errorf("%d sends; want 2", f.nsend)
	}
}

func TestFailedTurnHoldsTheAgentAndTellsTheParent(t *testing.T) {
	f := newFake()
	boom := errors.New("boom")
	f.sends = append(f.sends, fail(boom))
	res := newRunner(&clock{}).Run(context.Background(), f, Request{Prompt: "hi"})
	if !errors.Is(res.Err, boom) || res.Status != "idle" {
		t.Fatalf("result %+v; want boom, idle", res)
	}
	last := f.recs[len(f.recs)-1]
	if fd := last.data.(schema.TurnFailedData); last.event != schema.TurnFailed || fd.Error != "boom" || fd.Attempts != 1 {
		t.Errorf("last entry %s %+v; want turn.failed boom after 1 attempt", last.event, last.data)
	}
	wantTail(t, f, "end discard=false", "append turn.failed", "ended", "live-wait", "save idle", "rest held=true", "checkpoint",
		"notify", "notify-failure", "wake", "settled", "changed")
}

func TestOutputDeliveredIsNotRetried(t *testing.T) {
	f := newFake()
	f.sends = append(f.sends, func(_ context.Context, _ string, io provider.TurnIO) (string, error) {
		io.OnChunk("partial")
		return "", provider.Transient(errors.New("dropped"), 0)
	})
	res := newRunner(&clock{}).Run(context.Background(), f, Request{Prompt: "hi", OnChunk: func(string) {}})
	if res.Err == nil || f.nsend != 1 {
		t.Fatalf("error %v after %d sends; want a failure after 1", res.Err, f.nsend)
	}
	// A transient error given up on discards the session.
	wantTail(t, f, "end discard=true", "append turn.failed", "ended", "live-wait", "save idle", "rest held=true",
		"checkpoint", "notify", "notify-failure", "wake", "settled", "changed")
}

func TestCancelledTurnLogsTurnCancelled(t *testing.T) {
	f := newFake()
	f.sends = append(f.sends, func(ctx context.Context, _ string, _ provider.TurnIO) (string, error) {
		f.cancel()
		<-ctx.Done()
		return "", ctx.Err()
	})
	res := newRunner(&clock{}).Run(context.Background(), f, Request{Prompt: "hi"})
	wantRefusal(t, res.Err, domainerr.WrongState, "turn cancelled")
	if res.Status != "idle" {
		t.Errorf("status %q; want idle", res.Status)
	}
	if d := f.recs[len(f.recs)-1].data.(schema.TurnCancelledData); d.RunID != "run-1" || d.Turn != 5 {
		t.Errorf("turn.cancelled %+v", d)
	}
	wantTail(t, f, "end discard=true", "append turn.cancelled", "ended", "live-wait", "save idle", "rest held=false",
		"checkpoint", "notify", "wake", "settled", "changed")
}

func TestSuspendedTurnHandsOutTheWaitOnce(t *testing.T) {
	f := newFake()
	f.sends = append(f.sends, fail(provider.ErrRunSuspended))
	f.wait = &views.WaitInfo{TokenID: "tok-1", Kind: "input", RunID: "run-1"}
	f.token = "secret"
	f.liveWait = &session.Wait{Kind: "input", TokenID: "tok-1"}
	res := newRunner(&clock{}).Run(context.Background(), f, Request{Prompt: "hi"})
	if res.Err != nil || res.Status != "suspended" || res.Token != "secret" || res.Wait != f.wait {
		t.Fatalf("result %+v; want suspended with the wait and the secret", res)
	}
	if n := len(f.recs); n != 1 {
		t.Errorf("%d entries; want turn.start alone (the wait was logged by await_input)", n)
	}
	wantTail(t, f, "end discard=true", "suspended run-1", "ended", "live-wait", "save suspended", "rest held=false",
		"checkpoint", "notify", "wake", "settled", "changed")
	if w := f.saved[1].Run.Wait; w == nil || w.TokenID != "tok-1" {
		t.Errorf("session.json's wait %+v; want the live wait", w)
	}
}

func TestTimedOutTurnFailsNamingTheTimeout(t *testing.T) {
	f := newFake()
	f.policy.MaxRetries = 0
	f.policy.Timeout = time.Millisecond
	f.sends = append(f.sends, func(ctx context.Context, _ string, _ provider.TurnIO) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	})
	res := newRunner(&clock{}).Run(context.Background(), f, Request{Prompt: "hi"})
	if res.Err == nil || !strings.HasPrefix(res.Err.Error(), "turn timed out after 1ms") {
		t.Fatalf("error %v; want the turn timeout's", res.Err)
	}
	wantTail(t, f, "end discard=true", "append turn.failed", "ended", "live-wait", "save idle", "rest held=true",
		"checkpoint", "notify", "notify-failure", "wake", "settled", "changed")
}

func TestReleasedAgentStartsNoTurn(t *testing.T) {
	f := newFake()
	f.released = errors.New("lease lost")
	res := newRunner(&clock{}).Run(context.Background(), f, Request{Prompt: "hi"})
	wantRefusal(t, res.Err, domainerr.Unavailable, "agent ag-1 is no longer run by this daemon: lease lost")
	wantSteps(t, f, "begin", "ended", "live-wait", "rest held=false", "checkpoint", "wake", "settled", "changed")
}

func TestUnknownProviderStartsNoTurn(t *testing.T) {
	f := newFake()
	f.providerErr = errors.New("unknown provider")
	res := newRunner(&clock{}).Run(context.Background(), f, Request{Prompt: "hi"})
	if res.Err != f.providerErr {
		t.Fatalf("error %v; want the provider's, as it is", res.Err)
	}
	wantSteps(t, f, "begin", "provider inproc", "ended", "live-wait", "rest held=false", "checkpoint", "wake", "settled", "changed")
}

func TestOwedEndNotWrittenStartsNoTurn(t *testing.T) {
	f := newFake()
	f.flushErr = eventlog.ErrPoisoned
	res := newRunner(&clock{}).Run(context.Background(), f, Request{Prompt: "hi"})
	wantRefusal(t, res.Err, domainerr.Unavailable, "agent ag-1 cannot start a turn: "+eventlog.ErrPoisoned.Error())
	if !errors.Is(res.Err, eventlog.ErrPoisoned) {
		t.Errorf("error %v does not wrap the log's", res.Err)
	}
}

func TestTurnStartNotLoggedStartsNoTurn(t *testing.T) {
	f := newFake()
	diskFull := errors.New("no space left on device")
	f.appendErr[schema.TurnStart] = diskFull
	res := newRunner(&clock{}).Run(context.Background(), f, Request{Prompt: "hi"})
	if !errors.Is(res.Err, diskFull) || res.Err.Error() != "logging turn.start for agent ag-1: no space left on device" {
		t.Fatalf("error %v; want the log's, as it is (not poisoned: not a refusal)", res.Err)
	}
	wantSteps(t, f, "begin", "provider inproc", "flush-owed", "append turn.start",
		"ended", "live-wait", "rest held=false", "checkpoint", "wake", "settled", "changed")
}

func TestCompleteNotLoggedIsOwedAsFailed(t *testing.T) {
	f := newFake()
	f.sends = append(f.sends, answer("ok"))
	f.appendErr[schema.TurnComplete] = eventlog.ErrPoisoned
	res := newRunner(&clock{}).Run(context.Background(), f, Request{Prompt: "hi"})
	wantRefusal(t, res.Err, domainerr.Unavailable, "logging turn.complete for agent ag-1: "+eventlog.ErrPoisoned.Error())
	if res.Response != "" || res.Status != "" {
		t.Errorf("result %+v; want no response and no status", res)
	}
	if len(f.owed) != 1 || f.owed[0].event != schema.TurnFailed ||
		f.owed[0].data.(schema.TurnFailedData).Error != "the turn's result could not be logged: "+eventlog.ErrPoisoned.Error() {
		t.Fatalf("owed %+v; want turn.failed naming the log's error", f.owed)
	}
	// Outcome None: no session.json save, no transition, not held.
	wantTail(t, f, "end discard=false", "append turn.complete", "owe run-1 turn.failed", "ended", "live-wait", "rest held=false", "checkpoint",
		"wake", "settled", "changed")
}

func TestFailedEndNotLoggedIsOwed(t *testing.T) {
	f := newFake()
	f.sends = append(f.sends, fail(errors.New("boom")))
	f.appendErr[schema.TurnFailed] = errors.New("disk gone")
	res := newRunner(&clock{}).Run(context.Background(), f, Request{Prompt: "hi"})
	if res.Err == nil || res.Err.Error() != "boom" || res.Status != "idle" {
		t.Fatalf("result %+v; want the turn's error", res)
	}
	wantTail(t, f, "end discard=false", "append turn.failed", "owe run-1 turn.failed", "ended", "live-wait", "rest held=false", "checkpoint",
		"wake", "settled", "changed")
}

func TestRetryNotLoggedEndsTheAttempts(t *testing.T) {
	f := newFake()
	f.sends = append(f.sends, fail(provider.Transient(errors.New("overloaded"), 0)))
	f.appendErr[schema.TurnRetry] = errors.New("disk gone")
	res := newRunner(&clock{}).Run(context.Background(), f, Request{Prompt: "hi"})
	if res.Err == nil || res.Err.Error() != "logging turn.retry: disk gone (after transient provider error: overloaded)" || f.nsend != 1 {
		t.Fatalf("error %v after %d sends; want the retry's log error after 1", res.Err, f.nsend)
	}
}

func TestCallNotLoggedDiscardsTheSession(t *testing.T) {
	f := newFake()
	f.sends = append(f.sends, answer("ok"))
	f.drainErr = errors.New("tool.call not logged")
	res := newRunner(&clock{}).Run(context.Background(), f, Request{Prompt: "hi"})
	if res.Err != f.drainErr {
		t.Fatalf("error %v; want the drain's", res.Err)
	}
	wantTail(t, f, "close", "drain", "end discard=true", "append turn.failed", "ended", "live-wait", "save idle",
		"rest held=true", "checkpoint", "notify", "notify-failure", "wake", "settled", "changed")
}

func TestSuspensionByACredentialCallEndsTheAttempt(t *testing.T) {
	f := newFake()
	f.sends = append(f.sends, answer("ok"))
	f.closeErr = provider.ErrRunSuspended
	res := newRunner(&clock{}).Run(context.Background(), f, Request{Prompt: "hi"})
	if res.Status != "suspended" || res.Err != nil {
		t.Fatalf("result %+v; want suspended", res)
	}
}

func TestHistoryBlockGoesWithTheFirstPromptOnly(t *testing.T) {
	f := newFake()
	f.inject = &history.History{}
	f.sends = append(f.sends, answer("one"))
	newRunner(&clock{}).Run(context.Background(), f, Request{Prompt: "hi"})
	want := history.Block(history.History{}, "hi", history.BlockOptions{})
	if !contains(f.steps, fmt.Sprintf("send %q", want)) || !contains(f.steps, "injected") || f.inject != nil {
		t.Fatalf("steps %q; want the block sent, then dropped", f.steps)
	}
	f2 := newFake()
	f2.inject = &history.History{}
	f2.sends = append(f2.sends, fail(errors.New("boom")))
	newRunner(&clock{}).Run(context.Background(), f2, Request{Prompt: "hi"})
	if f2.inject == nil || contains(f2.steps, "injected") {
		t.Errorf("a failed attempt dropped the block; want it kept for the next")
	}
}

func TestCompletingAgentTerminatesInsteadOfWaking(t *testing.T) {
	f := newFake()
	f.sends = append(f.sends, answer("done"))
	f.complete = true
	f.termErr = errors.New("cannot")
	newRunner(&clock{}).Run(context.Background(), f, Request{Prompt: "hi"})
	wantTail(t, f, "rest held=false", "checkpoint", "notify", "terminate", "settled", "changed")
}

func TestNoSessionFailsTheTurn(t *testing.T) {
	f := newFake()
	f.acquireErr = errors.New("no slot")
	res := newRunner(&clock{}).Run(context.Background(), f, Request{Prompt: "hi"})
	if res.Err != f.acquireErr {
		t.Fatalf("error %v; want the acquire's", res.Err)
	}
	if fd := f.recs[1].data.(schema.TurnFailedData); fd.Attempts != 0 {
		t.Errorf("turn.failed attempts %d; want 0", fd.Attempts)
	}
}

// wantTail fails unless the steps end with want.
func wantTail(t *testing.T, f *fakeAgent, want ...string) {
	t.Helper()
	f.mu.Lock()
	steps := f.steps
	f.mu.Unlock()
	if len(steps) < len(want) {
		t.Fatalf("steps %q; want them to end with %q", steps, want)
	}
	wantSteps(t, &fakeAgent{steps: steps[len(steps)-len(want):]}, want...)
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// A watched agent's transitions owe their notices in the same write as
// the transition: turn.start with idle -> busy, the turn's end with
// busy -> idle, each named by the run and turn; Notify, which delivers
// them, comes after each write.
func TestTransitionNoticesGoInTheTransitionsWrite(t *testing.T) {
	for _, c := range []struct {
		name string
		send func(ctx context.Context, prompt string, io provider.TurnIO) (string, error)
		end  string
	}{
		{"complete", func(context.Context, string, provider.TurnIO) (string, error) { return "done", nil }, "turn.complete"},
		{"failed", fail(errors.New("boom")), "turn.failed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFake()
			f.watched = true
			f.policy.MaxRetries = 0
			f.sends = append(f.sends, c.send)
			newRunner(&clock{}).Run(context.Background(), f, Request{Prompt: "hi"})
			var steps []string
			for _, s := range f.steps {
				if strings.HasPrefix(s, "append ") || s == "notify" {
					steps = append(steps, s)
				}
			}
			want := []string{"append turn.start+notices.owed", "notify", "append " + c.end + "+notices.owed", "notify"}
			if strings.Join(steps, ", ") != strings.Join(want, ", ") {
				t.Fatalf("writes and notices %q; want %q", steps, want)
			}
			var owed []string
			for _, r := range f.recs {
				if r.event == "notices.owed" {
					owed = append(owed, r.data.(string))
				}
			}
			if want := []string{"idle->busy run-1/5", "busy->idle run-1/5"}; strings.Join(owed, ", ") != strings.Join(want, ", ") {
				t.Fatalf("owed %q; want %q", owed, want)
			}
		})
	}
}
