package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/session"
)

// The steps of a turn (turn.go, attempt.go) through the real engine: what
// each leaves durable (the agent's log, in order; session.json; the
// parent's inbox) and the TurnResult the caller gets.

func TestChoosePicksTheProviderModelAndRun(t *testing.T) {
	def := func(p string) string { return p + "-default" }
	ids := func() string { return "new-run" }
	for _, tc := range []struct {
		name string
		req  TurnRequest
		want turnPlan
	}{
		{"the agent's own", TurnRequest{}, turnPlan{RunID: "new-run", Turn: 8, Provider: "p1", Model: "m1"}},
		{"its provider, another model", TurnRequest{Provider: "p1", Model: "m2"}, turnPlan{RunID: "new-run", Turn: 8, Provider: "p1", Model: "m2"}},
		{"another provider: its default model", TurnRequest{Provider: "p2"}, turnPlan{RunID: "new-run", Turn: 8, Provider: "p2", Model: "p2-default"}},
		{"another provider and model", TurnRequest{Provider: "p2", Model: "x"}, turnPlan{RunID: "new-run", Turn: 8, Provider: "p2", Model: "x"}},
		{"a re-run", TurnRequest{RunID: "old", Turn: 3}, turnPlan{RunID: "old", Turn: 3, Provider: "p1", Model: "m1", Rerun: true}},
	} {
		if got := chooseTurn(tc.req, "p1", "m1", 7, def, ids); got != tc.want {
			t.Errorf("%s: chooseTurn = %+v; want %+v", tc.name, got, tc.want)
		}
	}
	if got := chooseTurn(TurnRequest{}, "p1", "", 7, def, ids); got.Model != "p1-default" {
		t.Errorf("an agent with no model of its own: model %q; want the provider's default", got.Model)
	}
}

// A complete turn, in order: turn.start (its run, turn, boot, provider,
// model and prompt), session.json running with the run started at the
// clock's time, the response streamed, turn.complete with the usage summed
// over the provider's reports, the result; then the work deferred during
// the turn (a spawn), session.json idle with no run, and the wake that
// takes a message which arrived during the turn.
func TestCompleteTurnStepsInOrder(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	var h *harness
	var lead string
	kidsDuring := -1
	p := &funcProv{send: func(ctx context.Context, _, prompt string, io provider.TurnIO) (string, error) {
		if prompt != "hi" {
			return "ok", nil // the wake turn
		}
		close(started)
		select {
		case <-release:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		io.OnChunk("he")
		io.OnUsage(provider.Usage{InputTokens: 3})
		io.OnUsage(provider.Usage{InputTokens: 4})
		r, err := io.Tools.CallTool(ctx, "spawn_agent", map[string]any{"name": "kid", "instructions": "work", "provider": "inproc", "model": "echo"})
		if err := errOf(r, err); err != nil {
			return "", err
		}
		kidsDuring = len(h.c.tree.Children(lead))
		return "hello", nil
	}}
	h = newHarness(t, withFakeClock, func(h *harness) {
		h.saveDelay = -1
		h.extra = map[string]provider.Provider{"fn": p}
	})
	boss := h.create("boss", "", "echo")
	lead, err := h.c.CreateAgent(context.Background(), CreateSpec{Name: "lead", ParentID: boss, Provider: "fn", Model: "m1"})
	if err != nil {
		t.Fatal(err)
	}
	var chunks []string
	done := make(chan TurnResult, 1)
	go func() {
		res, err := h.c.Send(context.Background(), lead, "hi", "", "", func(s string) { chunks = append(chunks, s) })
		if err != nil {
			res.Err = err
		}
		done <- res
	}()
	<-started
	var start schema.TurnStartData
	lastOf(h, lead, schema.TurnStart, &start)
	if start.Turn != 1 || start.BootID != h.c.BootID() || start.Provider != "fn" || start.Model != "m1" ||
		start.Prompt != "hi" || start.MessageIDs == nil || len(start.MessageIDs) != 0 {
		t.Errorf("turn.start %+v", start)
	}
	if s := h.sessionJSON(lead); s.State != session.StateRunning || s.Run == nil || s.Run.RunID != start.RunID ||
		s.Run.BootID != h.c.BootID() || !s.Run.StartedAt.Equal(clockStart) {
		t.Errorf("session.json while running: %s %+v; want running, run %s of this boot started at %v", s.State, s.Run, start.RunID, clockStart)
	}
	// A message that arrives during the turn waits for the wake after it.
	mid := h.tool(boss, "send_message", map[string]any{"recipient": "lead", "text": "more"})["message_id"]
	close(release)
	res := <-done
	if res.Err != nil || res.Response != "hello" || res.Status != session.StatusIdle || res.RunID != start.RunID {
		t.Fatalf("result %+v; want hello, idle, run %s", res, start.RunID)
	}
	if fmt.Sprint(chunks) != "[he]" {
		t.Errorf("chunks %q; want the one the provider streamed", chunks)
	}
	// The spawn was deferred to the turn's end, and done before Send
	// returned.
	if kidsDuring != 0 || len(h.c.tree.Children(lead)) != 1 {
		t.Errorf("children during the turn %d, after it %d; want 0 then 1 (the deferred spawn)", kidsDuring, len(h.c.tree.Children(lead)))
	}
	var complete schema.TurnCompleteData
	firstOf(h, lead, schema.TurnComplete, &complete)
	if complete.RunID != start.RunID || complete.Response != "hello" || complete.Usage == nil || complete.Usage.InputTokens != 7 {
		t.Errorf("turn.complete %+v; want the response and the usage summed (7)", complete)
	}
	h.until("the lead's wake turn took the message", func() bool { return h.count(lead, schema.TurnComplete) == 2 })
	h.quiet()
	// Each model request the provider reported is a usage.step, logged as
	// it is reported (SPEC 13).
	want := []string{schema.AgentCreated, schema.SessionCreated, schema.TurnStart, schema.MessageEnqueued, schema.UsageStep, schema.UsageStep,
		schema.ToolCall, schema.TurnComplete, schema.TurnStart, schema.TurnComplete}
	if got := h.events(lead); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the lead's log %v; want %v", got, want)
	}
	var wake schema.TurnStartData
	lastOf(h, lead, schema.TurnStart, &wake)
	if fmt.Sprint(wake.MessageIDs) != fmt.Sprint([]any{mid}) {
		t.Errorf("the wake turn took messages %v; want the one sent during the turn (%v)", wake.MessageIDs, mid)
	}
	if s := h.sessionJSON(lead); s.State != session.StateIdle || s.Run != nil {
		t.Errorf("session.json after the turns: %s %+v; want idle with no run", s.State, s.Run)
	}
	// Clock reads are not counted: StartedAt above being the fake clock's
	// time is what shows the run's start was read from the Core's clock.
}

func TestTurnStartWithoutMessagesLogsAnEmptyList(t *testing.T) {
	h := newHarness(t)
	id := h.create("a", "", "echo")
	h.send(id, "hi")
	for _, e := range h.entries(id) {
		if e.Event == schema.TurnStart {
			if ids, ok := dataOf(t, e)["message_ids"].([]any); !ok || ids == nil {
				t.Errorf("turn.start message_ids %s; want an empty list", e.Data)
			}
			return
		}
	}
	t.Fatal("no turn.start logged")
}

func TestTransientErrorRetriesThenCompletes(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		h.cfg.RetryBaseDelay = 10 * time.Millisecond
		h.cfg.MaxRetries = 2
	})
	h.prov.Register("flaky", inproc.Sequence(func(context.Context, *inproc.Turn) (string, error) {
		return "", providerTransient(errors.New("overloaded"))
	}, inproc.Reply("ok")))
	id := h.create("a", "", "flaky")
	before := len(h.entries(id))
	var notes []RetryNotice
	res, err := h.c.SendNotify(context.Background(), id, "hi", "", "", nil, func(n RetryNotice) { notes = append(notes, n) })
	if err != nil || res.Err != nil || res.Response != "ok" {
		t.Fatalf("result %+v, %v; want ok", res, err)
	}
	if got := h.eventsSince(id, before); fmt.Sprint(got) != fmt.Sprint([]string{schema.TurnStart, schema.TurnRetry, schema.TurnComplete}) {
		t.Fatalf("the turn logged %v; want turn.start, turn.retry, turn.complete", got)
	}
	var rd schema.TurnRetryData
	lastOf(h, id, schema.TurnRetry, &rd)
	if rd.RunID != res.RunID || rd.Turn != 1 || rd.Attempt != 1 || rd.DelayMS != 10 || !strings.Contains(rd.Error, "overloaded") {
		t.Errorf("turn.retry %+v; want attempt 1 of run %s, 10 ms, the error", rd, res.RunID)
	}
	if len(notes) != 1 || notes[0].MaxRetries != 2 || notes[0].Delay != 10*time.Millisecond || notes[0].RunID != res.RunID ||
		notes[0].Attempt != 1 || !strings.Contains(notes[0].Error, "overloaded") {
		t.Errorf("retry notices %+v", notes)
	}
	if fmt.Sprint(h.delays) != "[10ms]" {
		t.Errorf("slept %v; want 10ms once", h.delays)
	}
	if n := h.prov.Calls("flaky"); n != 2 {
		t.Errorf("%d sends; want 2", n)
	}
}

// A failed turn logs turn.failed, leaves the agent idle but held (it is
// not woken for the messages pending when it failed), tells the parent,
// and keeps the provider session (a permanent error leaves it usable).
func TestFailedTurnHoldsTheAgentAndTellsTheParent(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.saveDelay = -1 })
	boom := errors.New("boom")
	started, release := make(chan *inproc.Turn, 1), make(chan struct{})
	h.prov.Register("broken", inproc.Sequence(
		inproc.Signal(started, inproc.Block(release, func(context.Context, *inproc.Turn) (string, error) { return "", boom })),
		inproc.Reply("fine")))
	boss := h.create("boss", "", "echo")
	kid := h.create("kid", boss, "broken")
	before := len(h.entries(kid))
	done := make(chan TurnResult, 1)
	go func() {
		res, err := h.c.Send(context.Background(), kid, "hi", "", "", nil)
		if err != nil {
			res.Err = err
		}
		done <- res
	}()
	<-started
	// A message that arrives during the turn is pending when it fails.
	h.tool(boss, "send_message", map[string]any{"recipient": "kid", "text": "job"})
	close(release)
	res := <-done
	if !errors.Is(res.Err, boom) || res.Status != session.StatusIdle {
		t.Fatalf("result %+v; want boom, idle", res)
	}
	h.quiet()
	if got := h.eventsSince(kid, before); fmt.Sprint(got) != fmt.Sprint([]string{schema.TurnStart, schema.MessageEnqueued, schema.TurnFailed}) {
		t.Fatalf("the kid's log %v; want turn.start, the message, turn.failed and no wake turn (held)", got)
	}
	k := mustAgent(t, h.c, kid)
	if !heldOf(k) || pendingLen(k) != 1 {
		t.Fatalf("held %v with %d pending; want held, the message kept", heldOf(k), pendingLen(k))
	}
	var fd schema.TurnFailedData
	lastOf(h, kid, schema.TurnFailed, &fd)
	if fd.RunID != res.RunID || fd.Error != res.Err.Error() || fd.Attempts != 1 {
		t.Errorf("turn.failed %+v; want the error after 1 attempt", fd)
	}
	if s := h.sessionJSON(kid); s.State != session.StateIdle || s.Run != nil {
		t.Errorf("session.json %s %+v; want idle with no run", s.State, s.Run)
	}
	if n := failureNotices(h, boss, kid); n != 1 {
		t.Errorf("the parent got %d failure notices; want 1", n)
	}
	if nextTurnReopens(h, kid, "hi") {
		t.Error("the session was discarded after a permanent error; want it kept")
	}
}

// Once output reached the client the turn is not retried; the transient
// error given up on discards the provider session.
func TestOutputDeliveredIsNotRetried(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.noWake = true })
	h.prov.Register("chunky", inproc.Sequence(func(_ context.Context, tr *inproc.Turn) (string, error) {
		tr.Chunk("partial")
		return "", providerTransient(errors.New("dropped"))
	}, inproc.Reply("fine")))
	boss := h.create("boss", "", "echo")
	kid := h.create("kid", boss, "chunky")
	before := len(h.entries(kid))
	var got []string
	res, err := h.c.Send(context.Background(), kid, "hi", "", "", func(s string) { got = append(got, s) })
	if err != nil || res.Err == nil || h.prov.Calls("chunky") != 1 {
		t.Fatalf("result %+v, %v after %d sends; want a failure after 1", res, err, h.prov.Calls("chunky"))
	}
	if fmt.Sprint(got) != "[partial]" {
		t.Errorf("chunks %q", got)
	}
	if ev := h.eventsSince(kid, before); fmt.Sprint(ev) != fmt.Sprint([]string{schema.TurnStart, schema.TurnFailed}) {
		t.Fatalf("the turn logged %v; want turn.start, turn.failed (no retry)", ev)
	}
	if !heldOf(mustAgent(t, h.c, kid)) || failureNotices(h, boss, kid) != 1 {
		t.Errorf("held %v, parent's failure notices %d; want held and 1", heldOf(mustAgent(t, h.c, kid)), failureNotices(h, boss, kid))
	}
	if !nextTurnReopens(h, kid, "again") {
		t.Error("the session was kept after a transient error given up on; want it discarded")
	}
}

func TestCancelledTurnLogsTurnCancelled(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		h.saveDelay = -1
		h.noWake = true
	})
	started := make(chan *inproc.Turn, 1)
	h.prov.Register("slow", inproc.Signal(started, inproc.Block(make(chan struct{}), nil)))
	boss := h.create("boss", "", "echo")
	kid := h.create("kid", boss, "slow")
	before := len(h.entries(kid))
	done := make(chan TurnResult, 1)
	go func() { res, _ := h.c.Send(context.Background(), kid, "hi", "", "", nil); done <- res }()
	<-started
	if err := h.c.Cancel(context.Background(), kid); err != nil {
		t.Fatal(err)
	}
	res := <-done
	wantRefusal(t, res.Err, ErrWrongState, "turn cancelled")
	if res.Status != session.StatusIdle {
		t.Errorf("status %q; want idle", res.Status)
	}
	if ev := h.eventsSince(kid, before); fmt.Sprint(ev) != fmt.Sprint([]string{schema.TurnStart, schema.TurnCancelled}) {
		t.Fatalf("the turn logged %v; want turn.start, turn.cancelled", ev)
	}
	var d schema.TurnCancelledData
	lastOf(h, kid, schema.TurnCancelled, &d)
	if d.RunID != res.RunID || d.Turn != 1 {
		t.Errorf("turn.cancelled %+v; want run %s turn 1", d, res.RunID)
	}
	if s := h.sessionJSON(kid); s.State != session.StateIdle || s.Run != nil {
		t.Errorf("session.json %s %+v; want idle with no run", s.State, s.Run)
	}
	if heldOf(mustAgent(t, h.c, kid)) || failureNotices(h, boss, kid) != 0 {
		t.Errorf("a cancelled turn held the agent (%v) or told the parent (%d notices)", heldOf(mustAgent(t, h.c, kid)), failureNotices(h, boss, kid))
	}
	h.prov.Register("slow", inproc.Echo)
	if !nextTurnReopens(h, kid, "again") {
		t.Error("the session was kept after a cancel; want it discarded")
	}
}

func TestTimedOutTurnFailsNamingTheTimeout(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		h.cfg.MaxRetries = 0
		h.cfg.TurnTimeout = 20 * time.Millisecond
		h.saveDelay = -1
		h.noWake = true
	})
	h.prov.Register("stuck", inproc.Block(make(chan struct{}), nil))
	boss := h.create("boss", "", "echo")
	kid := h.create("kid", boss, "stuck")
	before := len(h.entries(kid))
	res, err := h.c.Send(context.Background(), kid, "hi", "", "", nil)
	if err != nil || res.Err == nil || !strings.HasPrefix(res.Err.Error(), "turn timed out after 20ms") ||
		!errors.Is(res.Err, context.DeadlineExceeded) || res.Status != session.StatusIdle {
		t.Fatalf("result %+v, %v; want the turn timeout's error", res, err)
	}
	if ev := h.eventsSince(kid, before); fmt.Sprint(ev) != fmt.Sprint([]string{schema.TurnStart, schema.TurnFailed}) {
		t.Fatalf("the turn logged %v; want turn.start, turn.failed", ev)
	}
	var fd schema.TurnFailedData
	lastOf(h, kid, schema.TurnFailed, &fd)
	if fd.Error != res.Err.Error() || fd.Attempts != 1 {
		t.Errorf("turn.failed %+v; want the timeout after 1 attempt", fd)
	}
	if s := h.sessionJSON(kid); s.State != session.StateIdle || s.Run != nil {
		t.Errorf("session.json %s %+v; want idle with no run", s.State, s.Run)
	}
	if !heldOf(mustAgent(t, h.c, kid)) || failureNotices(h, boss, kid) != 1 {
		t.Errorf("held %v, parent's failure notices %d; want held and 1", heldOf(mustAgent(t, h.c, kid)), failureNotices(h, boss, kid))
	}
	cfg := h.cfg
	cfg.TurnTimeout = time.Hour
	h.c.ApplyConfig(cfg)
	h.prov.Register("stuck", inproc.Echo)
	if !nextTurnReopens(h, kid, "again") {
		t.Error("the session was kept after a timeout; want it discarded")
	}
}

// An agent released between its claim and its turn starts none: nothing
// logged, session.json untouched, not held, the parent not told.
func TestReleasedAgentStartsNoTurn(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.saveDelay = -1 })
	boss := h.create("boss", "", "echo")
	kid := h.create("kid", boss, "echo")
	a := mustAgent(t, h.c, kid)
	h.quiet()
	if err := a.Claim(); err != nil {
		t.Fatal(err)
	}
	h.c.releaseAgent(kid, errors.New("lease lost"))
	before := h.events(kid)
	h.c.snaps.Wait()
	ops := len(h.fs.Ops())
	res := <-h.c.startTurn(a, TurnRequest{Prompt: "hi"})
	wantRefusal(t, res.Err, ErrUnavailable, "agent "+kid+" is no longer run by this daemon: lease lost")
	wantNoTurn(t, h, a, before, ops)
	if n := failureNotices(h, boss, kid); n != 0 {
		t.Errorf("the parent got %d failure notices; want none", n)
	}
}

// An agent whose provider is not (or no longer) configured starts no
// turn: the error is the provider lookup's, as it is.
func TestUnknownProviderStartsNoTurn(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		h.saveDelay = -1
		h.extra = map[string]provider.Provider{"gone": inproc.New("gone", inproc.Options{})}
	})
	id, err := h.c.CreateAgent(context.Background(), CreateSpec{Name: "a", Provider: "gone", Model: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	h.extra = nil // the provider leaves the configuration
	h.restart()
	_, want := h.c.provider("gone")
	a := mustAgent(t, h.c, id)
	before := h.events(id)
	h.c.snaps.Wait()
	ops := len(h.fs.Ops())
	res, err := h.c.Send(context.Background(), id, "hi", "", "", nil)
	if err != nil || res.Err == nil || res.Err.Error() != want.Error() || !errors.Is(res.Err, ErrInvalid) {
		t.Fatalf("result %+v, %v; want the provider lookup's error %q", res, err, want)
	}
	wantNoTurn(t, h, a, before, ops)
}

// The history block a fresh session must carry goes with the first prompt
// that succeeds: an attempt that fails keeps it for the next, and the
// prompt after a success is the message alone.
func TestHistoryBlockGoesWithTheFirstPromptOnly(t *testing.T) {
	h := newHarness(t)
	var mu sync.Mutex
	var prompts []string
	record := func(_ context.Context, tr *inproc.Turn) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		prompts = append(prompts, tr.Prompt)
		return "ok", nil
	}
	h.prov.Register("other", inproc.Sequence(func(ctx context.Context, tr *inproc.Turn) (string, error) {
		_, _ = record(ctx, tr)
		return "", providerTransient(errors.New("overloaded"))
	}, record, record))
	id := h.create("a", "", "echo")
	h.send(id, "first question")
	for _, m := range []string{"second", "third"} {
		if res, err := h.c.Send(context.Background(), id, m, "", "other", nil); err != nil || res.Err != nil {
			t.Fatalf("send %q: %+v, %v", m, res, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(prompts) != 3 {
		t.Fatalf("prompts %q; want 3 (a failed attempt, its retry, the next turn)", prompts)
	}
	if !strings.Contains(prompts[0], "first question") || !strings.Contains(prompts[0], "second") || prompts[0] == "second" {
		t.Fatalf("the first prompt on the new session %q; want the history block with the message", prompts[0])
	}
	if prompts[1] != prompts[0] {
		t.Errorf("the retry sent %q; want the block again (the failed attempt kept it)", prompts[1])
	}
	if prompts[2] != "third" {
		t.Errorf("the next turn sent %q; want the message alone", prompts[2])
	}
}

// An agent that completed in its turn is terminated after it instead of
// being woken for a message that arrived meanwhile.
func TestCompletingAgentTerminatesInsteadOfWaking(t *testing.T) {
	h := newHarness(t)
	started, release := make(chan *inproc.Turn, 1), make(chan struct{})
	h.prov.Register("quiet", inproc.Reply("noted"))
	h.prov.Register("finisher", inproc.Signal(started, inproc.Block(release, func(_ context.Context, tr *inproc.Turn) (string, error) {
		r, err := tr.Call("complete", map[string]any{"result": "42"})
		return "done", errOf(r, err)
	})))
	boss := h.create("boss", "", "quiet")
	kid := h.create("kid", boss, "finisher")
	h.tool(boss, "send_message", map[string]any{"recipient": "kid", "text": "compute"})
	<-started
	if r := h.tool(boss, "send_message", map[string]any{"recipient": "kid", "text": "more"}); r["error"] != nil {
		t.Fatalf("a message during the turn: %v", r)
	}
	close(release)
	h.until("the kid is gone", func() bool { _, ok := h.c.agent(kid); return !ok })
	h.quiet()
	if n := h.prov.Calls("finisher"); n != 1 {
		t.Fatalf("the completed agent ran %d turns; want 1 (terminated, not woken)", n)
	}
	var got []string
	for _, e := range h.entries(boss) {
		if e.Event == schema.MessageEnqueued {
			d := dataOf(t, e)
			got = append(got, fmt.Sprint(d["kind"], ":", d["payload"]))
		}
	}
	if fmt.Sprint(got) != "[response:42]" {
		t.Fatalf("the parent received %v; want the result alone (no failure notice)", got)
	}
}

// A turn whose provider session cannot be had fails with that error after
// no attempt.
func TestNoSessionFailsTheTurn(t *testing.T) {
	noSession := errors.New("no session for you")
	h := newHarness(t, func(h *harness) {
		h.noWake = true
		h.extra = map[string]provider.Provider{"fn": &funcProv{create: noSession}}
	})
	boss := h.create("boss", "", "echo")
	kid := h.create("kid", boss, "echo")
	before := len(h.entries(kid))
	res, err := h.c.Send(context.Background(), kid, "hi", "fn", "", nil)
	if err != nil || !errors.Is(res.Err, noSession) || res.Status != session.StatusIdle {
		t.Fatalf("result %+v, %v; want the session's error", res, err)
	}
	if ev := h.eventsSince(kid, before); fmt.Sprint(ev) != fmt.Sprint([]string{schema.TurnStart, schema.TurnFailed}) {
		t.Fatalf("the turn logged %v; want turn.start, turn.failed", ev)
	}
	var fd schema.TurnFailedData
	lastOf(h, kid, schema.TurnFailed, &fd)
	if fd.Attempts != 0 || fd.Error != res.Err.Error() {
		t.Errorf("turn.failed %+v; want the error after 0 attempts", fd)
	}
}

// A watched agent's transitions owe their notices in the same write as
// the transition: turn.start with idle -> busy, the turn's end with
// busy -> idle, each named by the run and turn; the notices are delivered
// after each write (the first while the turn still runs).
func TestTransitionNoticesGoInTheTransitionsWrite(t *testing.T) {
	for _, c := range []struct {
		name string
		prog inproc.Program
		end  string
	}{
		{"complete", inproc.Reply("done"), schema.TurnComplete},
		{"failed", inproc.FailPermanent(nil), schema.TurnFailed},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, func(h *harness) {
				h.noWake = true
				h.cfg.MaxRetries = 0
			})
			started, release := make(chan *inproc.Turn, 1), make(chan struct{})
			h.prov.Register("watched", inproc.Signal(started, inproc.Block(release, c.prog)))
			boss := h.create("boss", "", "echo")
			kid := h.create("kid", boss, "watched")
			if r := h.tool(boss, "subscribe", map[string]any{"agent_name": "kid", "transition": "*->*"}); r["status"] != "active" {
				t.Fatalf("subscribe: %v", r)
			}
			before := len(h.entries(kid))
			ops := len(h.fs.Ops())
			done := make(chan TurnResult, 1)
			go func() { res, _ := h.c.Send(context.Background(), kid, "hi", "", "", nil); done <- res }()
			<-started
			h.until("the idle -> busy notice, while the turn runs", func() bool { return stateNotices(h, boss, "kid: idle -> busy") == 1 })
			close(release)
			res := <-done
			h.until("the busy -> idle notice", func() bool { return stateNotices(h, boss, "kid: busy -> idle") == 1 })
			want := []string{schema.TurnStart, schema.NoticesOwed, c.end, schema.NoticesOwed}
			if got := h.eventsSince(kid, before); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("the turn logged %v; want %v", got, want)
			}
			writes := 0
			for _, op := range h.fs.Ops()[ops:] {
				if op.Kind == faultfs.OpWrite && strings.HasSuffix(op.Path, kid+"/events.jsonl") {
					writes++
				}
			}
			if writes != 2 {
				t.Fatalf("%d writes to the kid's log for its 4 entries; want 2 (each transition with its notices)", writes)
			}
			var owed []string
			for _, e := range h.entries(kid)[before:] {
				if e.Event == schema.NoticesOwed {
					var d schema.NoticesOwedData
					if err := json.Unmarshal(e.Data, &d); err != nil {
						t.Fatal(err)
					}
					if len(d.Subscriptions) != 1 || d.Subscriptions[0].Subscriber != boss {
						t.Fatalf("notices.owed %+v; want the boss's subscription", d)
					}
					owed = append(owed, d.From+"->"+d.To+" "+d.Key)
				}
			}
			key := res.RunID + "/1"
			if want := []string{"idle->busy " + key, "busy->idle " + key}; fmt.Sprint(owed) != fmt.Sprint(want) {
				t.Fatalf("owed %q; want %q", owed, want)
			}
		})
	}
}
