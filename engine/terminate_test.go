package engine

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/schedule"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/session"
	"github.com/warren-dev/warren/token"
)

// The tests of the former engine/internal/lifecycle for terminate.go
// (Terminate, TerminateTree, deepestFirst, terminate, Reset), through a
// real Core.

// kindOf is the condition of a domain error (nil for another error).
func kindOf(err error) error {
	var d *domainError
	if errors.As(err, &d) {
		return d.Kind
	}
	return nil
}

// terminatedEntry is the terminated agents' list entry of id.
func terminatedEntry(h *harness, id string) (TerminatedView, bool) {
	for _, v := range h.c.TerminatedList(context.Background()) {
		if v.ID == id {
			return v, true
		}
	}
	return TerminatedView{}, false
}

// terminate logs agent.terminated (alone: nobody watches), then
// session.json says terminated with no run (nothing else changed), the
// agent's timers are stopped, its provider session stopped, it is
// unlisted (out of the tree, remembered as gone with the entry's time:
// the clock is not read), its log closed, the change signalled and the
// termination logged.
func TestEndOrdersItsSteps(t *testing.T) {
	lp, lw := &lifeProv{}, &groupWrites{}
	// A start time with nanoseconds: the log keeps milliseconds, so the
	// entry's time and the clock's differ.
	h := newHarness(t, withLifeProv(lp), recordWrites(lw), func(h *harness) {
		h.clock = schedule.NewFake(clockStart.Add(123456789))
		h.saveDelay = -1
		h.noWake = true
	})
	boss := h.create("boss", "", "echo")
	kid := h.create("kid", boss, "echo")
	h.send(kid, "hi")
	rem := h.tool(kid, "remind_me", map[string]any{"reason": "later", "timeout": 3600})
	before := savedSession(t, h, kid)
	logs := h.c.OpenLogs()
	lb := captureLog(h)
	changed := h.c.changed.Wait()
	ops := len(h.fs.Ops())
	if err := h.c.Terminate(context.Background(), kid); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	default:
		t.Fatal("the change was not signalled")
	}
	ws := lw.of(kid)
	if ws[len(ws)-1] != "agent.terminated" {
		t.Fatalf("writes %q, want agent.terminated (alone) last", ws)
	}
	ended := lastEntry(t, h, kid, schema.AgentTerminated)
	if d := dataAs[schema.AgentTerminatedData](t, ended); d != (schema.AgentTerminatedData{AgentID: kid}) {
		t.Fatalf("agent.terminated %+v", d)
	}
	after := savedSession(t, h, kid)
	want := *before
	want.State, want.Run, want.UpdatedAt = session.StateTerminated, nil, after.UpdatedAt
	if !reflect.DeepEqual(*after, want) {
		t.Fatalf("session.json = %+v, want %+v (terminated with no run, nothing else changed)", *after, want)
	}
	if oi, si := opIndex(h.fs.Ops()[ops:], faultfs.OpWrite, kid+"/events.jsonl"), opIndex(h.fs.Ops()[ops:], faultfs.OpRename, kid+"/"+session.FileName); oi < 0 || si < oi {
		t.Fatalf("agent.terminated written at op %d, session.json at %d: want the log first", oi, si)
	}
	if h.c.sched.Cancel(kid, reminderTimer(rem["reminder_id"].(string))) {
		t.Fatal("the agent's reminder was still armed")
	}
	if !lp.wasStopped(before.Handle) {
		t.Fatal("the agent's provider session was not stopped")
	}
	if _, ok := h.c.agent(kid); ok || len(h.c.tree.Children(boss)) != 0 {
		t.Fatal("the agent is still listed")
	}
	v, ok := terminatedEntry(h, kid)
	if !ok || v.Path != "boss/kid" || v.ParentID != boss || !v.TerminatedAt.Equal(ended.TS) {
		t.Fatalf("terminated list entry %+v (known %v); want its path and the entry's time %v", v, ok, ended.TS)
	}
	if n := h.c.OpenLogs(); n != logs-1 {
		t.Fatalf("%d logs open after the termination, was %d: its log was not closed", n, logs)
	}
	if !strings.Contains(lb.String(), "agent terminated: agent="+kid) {
		t.Errorf("log: %s", lb.String())
	}
}

// The terminated notices owed to the subscriptions in place go in
// agent.terminated's write (named by the agent's id); the subscribers
// are told after it.
func TestEndLogsTheOwedNoticesWithTheTermination(t *testing.T) {
	lw := &groupWrites{}
	h := newHarness(t, recordWrites(lw), func(h *harness) { h.noWake = true })
	boss := h.create("boss", "", "echo")
	kid := h.create("kid", boss, "echo")
	r := h.tool(boss, "subscribe", map[string]any{"agent_name": "kid", "transition": "*->terminated"})
	if r["status"] != "active" {
		t.Fatalf("subscribe = %v", r)
	}
	if err := h.c.Terminate(context.Background(), kid); err != nil {
		t.Fatal(err)
	}
	hasWrite(t, lw, kid, "agent.terminated+notices.owed")
	n := dataAs[schema.NoticesOwedData](t, lastEntry(t, h, kid, schema.NoticesOwed))
	if n.From != schema.StateIdle || n.To != schema.StateTerminated || n.Key != kid ||
		!reflect.DeepEqual(n.Subscriptions, []schema.NoticeOwed{{SubscriptionID: r["subscription_id"].(string), Subscriber: boss}}) {
		t.Fatalf("notices.owed %+v", n)
	}
	told := false
	for _, m := range pendingOf(mustAgent(t, h.c, boss)) {
		told = told || strings.Contains(m.Payload, "kid: idle -> terminated")
	}
	if !told {
		t.Fatalf("the subscriber was not told: %+v", pendingOf(mustAgent(t, h.c, boss)))
	}
}

// A live wait's token is revoked (reason terminated) before anything
// else; a revocation that fails is returned as it is, and nothing else
// is done.
func TestEndRevokesALiveWaitFirst(t *testing.T) {
	lw := &groupWrites{}
	h := newHarness(t, recordWrites(lw), func(h *harness) { h.healBackoff = -1 })
	h.prov.Register("ask", asker(3600))
	kid := h.create("kid", "", "ask")
	res := h.send(kid, "go")
	tokID := waitTokenID(t, h, kid)
	if err := h.c.Terminate(context.Background(), kid); err != nil {
		t.Fatal(err)
	}
	ws := lw.of(kid)
	if got := strings.Join(ws[len(ws)-2:], " "); got != "token.revoked agent.terminated" {
		t.Fatalf("the termination wrote %q, want token.revoked then agent.terminated", got)
	}
	if d := dataAs[schema.TokenData](t, lastEntry(t, h, kid, schema.TokenRevoked)); d != (schema.TokenData{TokenID: tokID, RunID: res.RunID, Reason: schema.RevokeTerminated}) {
		t.Fatalf("token.revoked %+v", d)
	}
	if got, _ := h.c.tokens.Get(tokID); got.State != token.Revoked {
		t.Fatalf("token %s", got.State)
	}

	other := h.create("other", "", "ask")
	h.send(other, "go")
	tok2 := waitTokenID(t, h, other)
	h.fs.Inject(faultfs.Rule{Kind: faultfs.OpWrite, Path: other + "/events.jsonl", Err: syscall.ENOSPC, Sticky: true})
	err := h.c.Terminate(context.Background(), other)
	if err == nil || !strings.HasPrefix(err.Error(), "revoking token "+tok2+": ") || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Terminate = %v, want the revocation's error as it is", err)
	}
	h.fs.ClearRules()
	if _, ok := h.c.agent(other); !ok || h.count(other, schema.AgentTerminated) != 0 || h.count(other, schema.TokenRevoked) != 0 {
		t.Fatal("something more was done after the revocation failed")
	}
	if got, _ := h.c.tokens.Get(tok2); got.State != token.Live {
		t.Fatalf("token %s", got.State)
	}
}

// An agent with children, or with a damaged log, is refused (each with
// its text); a terminated one is left as it is; a run end still owed or
// an agent.terminated that cannot be written fail, and nothing else is
// done.
func TestEndRefusalsAndFailures(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(h *harness, id string)
		kind  error
		text  string // %[1]s: the agent's id
		cause error  // what the failure wraps
	}{
		{"one child", func(h *harness, id string) { h.create("c", id, "echo") }, ErrWrongState,
			"agent kid has 1 child; terminate it first, or the whole subtree at once (recursive: warren agent terminate --recursive)", nil},
		{"two children", func(h *harness, id string) { h.create("c", id, "echo"); h.create("d", id, "echo") }, ErrWrongState,
			"agent kid has 2 children; terminate them first, or the whole subtree at once (recursive: warren agent terminate --recursive)", nil},
		{"terminated", nil, nil, "", nil},
		{"corrupt", func(h *harness, id string) { damageLogs(h.t, h, id) }, ErrWrongState,
			"agent %[1]s has a damaged log; run `warren repair %[1]s` first", nil},
		{"owed end", func(h *harness, id string) {
			started, release := make(chan *inproc.Turn, 1), make(chan struct{})
			h.prov.Register("gate", inproc.Signal(started, inproc.Block(release, inproc.Echo)))
			done := make(chan struct{})
			go func() { _, _ = h.c.Send(context.Background(), id, "x", "", "gate", nil); close(done) }()
			<-started
			h.fs.Inject(faultfs.Rule{Kind: faultfs.OpWrite, Path: id + "/events.jsonl", Err: syscall.ENOSPC, Sticky: true})
			close(release)
			<-done
			if !mustAgent(h.t, h.c, id).Owed() {
				h.t.Fatal("the run's end is not owed")
			}
		}, nil, "terminating %[1]s: ", syscall.ENOSPC},
		{"append", func(h *harness, id string) {
			h.fs.Inject(faultfs.Rule{Kind: faultfs.OpWrite, Path: id + "/events.jsonl", Err: syscall.ENOSPC, Sticky: true})
		}, nil, "logging agent.terminated for %[1]s: ", syscall.ENOSPC},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lp := &lifeProv{}
			h := newHarness(t, withLifeProv(lp), func(h *harness) {
				h.noWake = true
				h.healBackoff = -1
				h.saveDelay = -1
			})
			id := h.create("kid", "", "echo")
			h.send(id, "hi")
			a := mustAgent(t, h.c, id)
			if tc.name == "terminated" {
				// A second terminate of the same agent (another one
				// terminated it meanwhile) finds it terminated.
				if err := h.c.Terminate(context.Background(), id); err != nil {
					t.Fatal(err)
				}
			} else if tc.setup != nil {
				tc.setup(h, id)
				a = mustAgent(t, h.c, id)
			}
			h.quiet()
			h.c.snaps.Wait()
			ops, logged := len(h.fs.Ops()), h.read(h.c.logPath(id))
			_, stopped := lp.counts()
			err := h.c.terminate(context.Background(), a)
			h.c.snaps.Wait()
			text := tc.text
			if strings.Contains(text, "%[1]s") {
				text = fmt.Sprintf(text, id)
			}
			switch {
			case text == "":
				if err != nil {
					t.Fatalf("terminate = %v", err)
				}
			case tc.cause == nil:
				if err == nil || err.Error() != text || kindOf(err) != tc.kind {
					t.Fatalf("terminate = %v (kind %v), want %q (kind %v)", err, kindOf(err), text, tc.kind)
				}
			default:
				if err == nil || !strings.HasPrefix(err.Error(), text) || !errors.Is(err, tc.cause) || kindOf(err) != nil {
					t.Fatalf("terminate = %v (kind %v), want %q... wrapping %v", err, kindOf(err), text, tc.cause)
				}
			}
			h.fs.ClearRules()
			if n := len(effects(h, ops)); tc.cause == nil && n != 0 {
				t.Fatalf("a refused terminate made %d filesystem changes: %v", n, effects(h, ops))
			}
			if got := h.read(h.c.logPath(id)); string(got) != string(logged) {
				t.Fatalf("the log changed: %q, was %q", got, logged)
			}
			if _, now := lp.counts(); now != stopped {
				t.Fatal("a provider session was stopped")
			}
			if _, ok := h.c.agent(id); ok == (tc.name == "terminated") {
				t.Fatalf("agent listed %v after the terminate", ok)
			}
		})
	}
}

// A log that fails to close is warned of; one closed already is not.
func TestEndDoesNotWarnOfALogClosedAlready(t *testing.T) {
	st := &stepStore{}
	h := newHarness(t, withStepStore(st), func(h *harness) { h.noWake = true })
	closed := h.create("closed", "", "echo")
	failing := h.create("failing", "", "echo")
	st.failClose(closed, fmt.Errorf("store: %w", eventlog.ErrClosed))
	st.failClose(failing, errors.New("disk gone"))
	lb := captureLog(h)
	for _, id := range []string{closed, failing} {
		if err := h.c.Terminate(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	}
	log := lb.String()
	if strings.Count(log, "closing the log of a terminated agent") != 1 || !strings.Contains(log, "agent="+failing+` err="disk gone"`) {
		t.Errorf("log:\n%s", log)
	}
}

// Terminate refuses an agent mid-turn; an unknown agent is not found.
// Nothing is logged.
func TestTerminateRefusesABusyAgent(t *testing.T) {
	h := newHarness(t)
	started, release := make(chan struct{}), make(chan struct{})
	h.prov.Register("work", held(started, release, inproc.Echo))
	kid := h.create("kid", "", "work")
	done := busyAgent(h, kid, started)
	before := h.events(kid)
	err := h.c.Terminate(context.Background(), kid)
	if !errors.Is(err, ErrWrongState) || err.Error() != "agent kid is mid-turn; cancel it first (warren agent cancel)" {
		t.Fatalf("Terminate = %v", err)
	}
	if err := h.c.Terminate(context.Background(), "nobody"); !errors.Is(err, ErrNotFound) || err.Error() != notFound("nobody").Error() {
		t.Fatalf("Terminate of an unknown agent = %v", err)
	}
	if got := h.events(kid); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Fatalf("the refused terminate logged: %v", got)
	}
	close(release)
	<-done
}

func TestDeepestFirst(t *testing.T) {
	kids := map[string][]string{"r": {"a", "b"}, "a": {"a1", "a2"}, "a2": {"x"}}
	got := deepestFirst(func(id string) []string { return kids[id] }, "r")
	if want := []string{"a1", "x", "a2", "a", "b", "r"}; !reflect.DeepEqual(got, want) {
		t.Errorf("deepestFirst = %v, want %v", got, want)
	}
	if got := deepestFirst(func(string) []string { return nil }, "leaf"); !reflect.DeepEqual(got, []string{"leaf"}) {
		t.Errorf("a leaf = %v", got)
	}
}

// treeOf makes root, root/a, root/b and root/a/a1 (model work, the
// others echo) and returns their ids.
func treeOf(h *harness, model string) (r, a, b, a1 string) {
	r = h.create("root", "", model)
	a = h.create("a", r, "echo")
	b = h.create("b", r, "echo")
	a1 = h.create("a1", a, model)
	return r, a, b, a1
}

// TerminateTree terminates the subtree deepest first (agent.terminated is
// logged in that order) and returns the agents with their paths.
func TestTerminateTreeGoesDeepestFirst(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.noWake = true })
	r, a, b, a1 := treeOf(h, "echo")
	events, unsubscribe := h.c.bus.Subscribe("")
	defer unsubscribe()
	done, err := h.c.TerminateTree(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	want := []TerminatedAgent{{a1, "root/a/a1"}, {a, "root/a"}, {b, "root/b"}, {r, "root"}}
	if !reflect.DeepEqual(done, want) {
		t.Errorf("terminated %v, want %v", done, want)
	}
	var order []string
	for len(order) < 4 {
		if ev := <-events; ev.Entry.Event == schema.AgentTerminated {
			order = append(order, ev.AgentID)
		}
	}
	if !reflect.DeepEqual(order, []string{a1, a, b, r}) {
		t.Errorf("agent.terminated logged for %v, want %v", order, []string{a1, a, b, r})
	}
	if len(h.c.List()) != 0 {
		t.Fatalf("agents left: %v", h.c.List())
	}
}

// When one of the subtree's agents is mid-turn nothing is terminated,
// and the error names those mid-turn.
func TestTerminateTreeRefusesEverythingWhenOneIsBusy(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.noWake = true })
	started, release := make(chan struct{}), make(chan struct{})
	h.prov.Register("work", held(started, release, inproc.Echo))
	r, _, _, a1 := treeOf(h, "work")
	var dones []<-chan TurnResult
	for _, tc := range []struct {
		busy string
		text string
	}{
		{a1, "nothing was terminated: root/a/a1 is mid-turn; cancel first (warren agent cancel REF), then terminate again"},
		{r, "nothing was terminated: root/a/a1, root are mid-turn; cancel first (warren agent cancel REF), then terminate again"},
	} {
		dones = append(dones, busyAgent(h, tc.busy, started))
		done, err := h.c.TerminateTree(context.Background(), r)
		if err == nil || err.Error() != tc.text || kindOf(err) != ErrWrongState || done != nil {
			t.Errorf("TerminateTree = %v, %v; want %q", done, err, tc.text)
		}
		for _, id := range []string{r, a1} {
			if h.count(id, schema.AgentTerminated) != 0 {
				t.Fatal("an agent was terminated")
			}
		}
		if len(h.c.List()) != 4 {
			t.Fatalf("agents %v", h.c.List())
		}
	}
	close(release)
	for _, d := range dones {
		<-d
	}
}

// A failure part way says which agents were terminated already, keeping
// the refusal's kind; a failure at the first agent is returned as it is.
func TestTerminateTreeSaysWhatItTerminatedBeforeAFailure(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.noWake = true })
	r := h.create("root", "", "echo")
	a := h.create("a", r, "echo")
	b := h.create("b", r, "echo")
	lone := h.create("lone", "", "echo")
	damageLogs(t, h, b, lone)
	_, err := h.c.TerminateTree(context.Background(), r)
	want := "terminating b: agent " + b + " has a damaged log; run `warren repair " + b + "` first (already terminated: root/a)"
	if err == nil || err.Error() != want || kindOf(err) != ErrWrongState {
		t.Fatalf("TerminateTree = %v, want %q keeping the refusal's kind", err, want)
	}
	if _, ok := h.c.agent(a); ok {
		t.Fatal("root/a was not terminated")
	}
	for _, id := range []string{b, r} {
		if _, ok := h.c.agent(id); !ok {
			t.Fatalf("%s was terminated", h.c.tree.Path(id))
		}
	}
	if _, err := h.c.TerminateTree(context.Background(), lone); err == nil || err.Error() != "agent "+lone+" has a damaged log; run `warren repair "+lone+"` first" {
		t.Fatalf("TerminateTree = %v", err)
	}
}

// Reset logs context.reset under a claim, stops the provider session and
// saves session.json without it (no handle, no provider blob; nothing
// else changed), then releases the agent: its next turn runs on a new
// session with no history.
func TestResetOrdersItsSteps(t *testing.T) {
	lp, lw := &lifeProv{}, &groupWrites{}
	h := newHarness(t, withLifeProv(lp), recordWrites(lw), func(h *harness) { h.saveDelay = -1 })
	type seen struct {
		handle  string
		history int
	}
	turns := make(chan seen, 1)
	h.prov.Register("m", func(_ context.Context, tr *inproc.Turn) (string, error) {
		turns <- seen{tr.Handle, len(tr.History)}
		return "ok", nil
	})
	kid := h.create("kid", "", "m")
	h.send(kid, "one")
	first := <-turns
	reset := func(when string, wantBlob bool) {
		t.Helper()
		before := savedSession(t, h, kid)
		if wantBlob != (len(before.ProviderState) > 0) || before.Handle == "" {
			t.Fatalf("%s: session.json before the reset %+v", when, before)
		}
		ops := len(h.fs.Ops())
		if err := h.c.Reset(kid); err != nil {
			t.Fatal(err)
		}
		if ws := lw.of(kid); ws[len(ws)-1] != "context.reset" {
			t.Fatalf("%s: writes %q, want context.reset last", when, ws)
		}
		if d := dataAs[schema.ContextResetData](t, lastEntry(t, h, kid, schema.ContextReset)); d != (schema.ContextResetData{AgentID: kid}) {
			t.Fatalf("%s: context.reset %+v", when, d)
		}
		after := savedSession(t, h, kid)
		want := *before
		want.ProviderState, want.Handle, want.UpdatedAt = nil, "", after.UpdatedAt
		if !reflect.DeepEqual(*after, want) {
			t.Fatalf("%s: session.json = %+v, want %+v (the provider session dropped, nothing else)", when, *after, want)
		}
		if oi, si := opIndex(h.fs.Ops()[ops:], faultfs.OpWrite, kid+"/events.jsonl"), opIndex(h.fs.Ops()[ops:], faultfs.OpRename, kid+"/"+session.FileName); oi < 0 || si < oi {
			t.Fatalf("%s: context.reset written at op %d, session.json at %d: want the log first", when, oi, si)
		}
		if isBusy(mustAgent(t, h.c, kid)) {
			t.Fatalf("%s: the agent is still claimed", when)
		}
	}

	// The live session is stopped.
	reset("with a live session", false)
	if !lp.wasStopped(first.handle) {
		t.Fatal("the provider session was not stopped")
	}
	if res := h.send(kid, "two"); res.Response != "ok" {
		t.Fatalf("send after the reset: %+v", res)
	}
	next := <-turns
	if next.handle == first.handle || next.history != 0 {
		t.Fatalf("the turn after the reset ran on session %s with %d turns of history; want a new one with none", next.handle, next.history)
	}

	// An evicted session (its blob in session.json) is not restored.
	if err := h.c.Evict(context.Background(), kid); err != nil {
		t.Fatal(err)
	}
	reset("with an evicted session", true)
	if res := h.send(kid, "three"); res.Response != "ok" {
		t.Fatalf("send after the reset: %+v", res)
	}
	if last := <-turns; last.handle == next.handle || last.history != 0 {
		t.Fatalf("the turn after the reset ran on session %s with %d turns of history; want a new one with none", last.handle, last.history)
	}
}

// Reset refuses an open run (after its claim, which it releases), returns
// a refused claim as it is, and a context.reset that cannot be logged
// fails, releasing the agent and leaving its session.
func TestResetRefusals(t *testing.T) {
	lp := &lifeProv{}
	h := newHarness(t, withLifeProv(lp), func(h *harness) { h.healBackoff = -1 })
	h.prov.Register("ask", asker(3600))
	started, release := make(chan struct{}), make(chan struct{})
	h.prov.Register("work", held(started, release, inproc.Echo))

	waiting := h.create("waiting", "", "ask")
	h.send(waiting, "go")
	before := h.events(waiting)
	err := h.c.Reset(waiting)
	if !errors.Is(err, ErrWrongState) || err.Error() != "agent waiting has a run that has not ended (waiting or interrupted); resume or cancel it first" {
		t.Fatalf("Reset = %v", err)
	}
	if isBusy(mustAgent(t, h.c, waiting)) || fmt.Sprint(h.events(waiting)) != fmt.Sprint(before) {
		t.Fatal("the refused reset left the agent claimed or logged")
	}

	busy := h.create("busy", "", "work")
	done := busyAgent(h, busy, started)
	a := mustAgent(t, h.c, busy)
	want := a.Claim() // refused (mid-turn): changes nothing
	before = h.events(busy)
	if err := h.c.Reset(busy); want == nil || err == nil || err.Error() != want.Error() {
		t.Fatalf("Reset = %v, want the claim's error %v", err, want)
	}
	if fmt.Sprint(h.events(busy)) != fmt.Sprint(before) {
		t.Fatal("the refused reset logged")
	}
	close(release)
	<-done

	idle := h.create("idle", "", "echo")
	h.send(idle, "hi")
	_, stopped := lp.counts()
	h.fs.Inject(faultfs.Rule{Kind: faultfs.OpWrite, Path: idle + "/events.jsonl", Err: syscall.ENOSPC, Sticky: true})
	err = h.c.Reset(idle)
	h.fs.ClearRules()
	if err == nil || !strings.HasPrefix(err.Error(), "logging context.reset for "+idle+": ") || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Reset = %v", err)
	}
	if isBusy(mustAgent(t, h.c, idle)) || h.count(idle, schema.ContextReset) != 0 {
		t.Fatal("the failed reset left the agent claimed, or logged")
	}
	if _, now := lp.counts(); now != stopped {
		t.Fatal("the failed reset stopped the provider session")
	}
}

// TestSendToATerminatedAgentSaysTerminated: a reference (name, path or
// id) to a terminated agent is refused saying it is terminated, not that
// it does not exist.
func TestSendToATerminatedAgentSaysTerminated(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.noWake = true })
	lead := h.create("lead", "", "echo")
	kid := h.create("kid", lead, "echo")
	if err := h.c.Terminate(context.Background(), kid); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"kid", "lead/kid", kid} {
		id, err := h.c.Resolve(ref)
		if !errors.Is(err, ErrNotFound) || !strings.Contains(errText(err), "lead/kid ("+kid+") is terminated") {
			t.Errorf("Resolve(%q) = %q, %v; want a refusal saying it is terminated", ref, id, err)
		}
	}
	if _, err := h.c.Resolve("nobody"); err == nil || strings.Contains(err.Error(), "terminated") {
		t.Errorf("Resolve(nobody) = %v", err)
	}
}
