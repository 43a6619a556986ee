package engine

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/schema"
)

// blockFirst is a program whose first n turns tell the agent's parent
// "half done", then wait until their context ends (a stop or a crash
// cuts them off); later turns make the same call (answered from the log
// on a re-run) and finish. started is told of every turn.
func blockFirst(n int32, started chan<- struct{}) inproc.Program {
	var turns atomic.Int32
	return func(ctx context.Context, tr *inproc.Turn) (string, error) {
		if _, err := tr.Call("send_message", map[string]any{"recipient": "lead", "text": "half done"}); err != nil {
			return "", err
		}
		k := turns.Add(1)
		started <- struct{}{}
		if k <= n {
			<-ctx.Done()
			return "", ctx.Err()
		}
		return "all done", nil
	}
}

// enqueuedFrom counts the message.enqueued entries of id's log sent by
// sender.
func enqueuedFrom(h *harness, id, sender string) int {
	n := 0
	for _, e := range h.entries(id) {
		if e.Event == schema.MessageEnqueued && strings.Contains(string(e.Data), `"sender":"`+sender+`"`) {
			n++
		}
	}
	return n
}

// turnsTaking lists the runs of the turn.start entries of id's log that
// took message msgID.
func turnsTaking(h *harness, id, msgID string) []string {
	var runs []string
	for _, e := range h.entries(id) {
		if e.Event != schema.TurnStart {
			continue
		}
		var d schema.TurnStartData
		_ = json.Unmarshal(e.Data, &d)
		for _, m := range d.MessageIDs {
			if m == msgID {
				runs = append(runs, d.RunID)
			}
		}
	}
	return runs
}

// byOf lists the by of id's run.resumed entries, in order.
func byOf(h *harness, id string) []string {
	var out []string
	for _, e := range h.entries(id) {
		if e.Event == schema.RunResumed {
			var d schema.RunResumedData
			_ = json.Unmarshal(e.Data, &d)
			out = append(out, d.By)
		}
	}
	return out
}

// startWorker makes a lead (echo) and its worker running prog, sends the
// worker a message from the lead, and returns once the worker's wake turn
// runs, with the message's id.
func startWorker(t *testing.T, h *harness, started <-chan struct{}) (lead, worker, msgID string) {
	t.Helper()
	lead = h.create("lead", "", "echo")
	worker = h.create("worker", lead, "work")
	res := h.tool(lead, "send_message", map[string]any{"recipient": "worker", "text": "build it"})
	msgID, _ = res["message_id"].(string)
	if msgID == "" {
		t.Fatalf("send_message: %v", res)
	}
	<-started
	// The worker's "half done" wakes the lead: let that turn end, so a
	// crash or stop that follows finds only the worker's run open.
	h.until("the lead's wake turn ended", func() bool {
		return h.count(lead, schema.TurnComplete) >= 1 && h.statusOf(lead) == "idle"
	})
	return lead, worker, msgID
}

// TestStopInterruptsAndTheNextStartReRuns (SPEC 9, 11.7): a clean stop
// logs run.interrupted (shutdown) for a running turn and never
// turn.cancelled; the next start re-runs it by itself (resume policy
// auto), with the message its turn.start took and no other turn taking
// it, its tool calls answered from the log, and exactly one
// run.interrupted. USER hears which runs the start found interrupted.
func TestStopInterruptsAndTheNextStartReRuns(t *testing.T) {
	h := newHarness(t, withAutoResume)
	started := make(chan struct{}, 4)
	h.prov.Register("work", blockFirst(1, started))
	lead, worker, msgID := startWorker(t, h, started)
	h.restart() // a clean stop, then a start
	if n := h.count(worker, schema.TurnCancelled); n != 0 {
		t.Fatalf("the stop logged turn.cancelled x%d", n)
	}
	ri := dataAs[schema.RunInterruptedData](t, lastEntry(t, h, worker, schema.RunInterrupted))
	if ri.Reason != schema.ReasonShutdown {
		t.Fatalf("the stop logged %+v, want reason shutdown", ri)
	}
	h.until("the re-run completes", func() bool { return h.count(worker, schema.TurnComplete) == 1 })
	h.quiet()
	if n := h.count(worker, schema.RunInterrupted); n != 1 {
		t.Fatalf("run.interrupted x%d, want 1", n)
	}
	if by := byOf(h, worker); len(by) != 1 || by[0] != schema.ByAuto {
		t.Fatalf("run.resumed by %v, want one by auto", by)
	}
	if runs := turnsTaking(h, worker, msgID); len(runs) != 2 || runs[0] != runs[1] || runs[0] != ri.RunID {
		t.Fatalf("turns taking the message: %v; want the interrupted run and its re-run only", runs)
	}
	if n := enqueuedFrom(h, lead, worker); n != 1 {
		t.Fatalf("the lead got %d messages from the worker; the re-run must answer send_message from the log", n)
	}
	var told string
	for _, m := range h.c.UserPending(context.Background()) {
		if m.Sender == "SYSTEM" && strings.Contains(m.Payload, "interrupted run") {
			told = m.Payload
		}
	}
	if !strings.Contains(told, "lead/worker: run "+ri.RunID+" (shutdown), re-run") {
		t.Fatalf("USER was told %q", told)
	}
	found := false
	for _, r := range h.c.Interrupted() { // the lead's turn on "half done" may have been cut off too
		found = found || (r.AgentID == worker && r.Rerun && r.RunID == ri.RunID)
	}
	if !found {
		t.Fatalf("Interrupted() = %+v; want the worker's run, re-run", h.c.Interrupted())
	}
}

// TestAKilledTeamMovesOnByItself: the same after a kill -9: one
// run.interrupted (process_restart), a re-run by auto, the message taken
// by the run alone.
func TestAKilledTeamMovesOnByItself(t *testing.T) {
	h := newHarness(t, withAutoResume)
	started := make(chan struct{}, 4)
	h.prov.Register("work", blockFirst(1, started))
	lead, worker, msgID := startWorker(t, h, started)
	h.crash(faultfs.ProcessCrash)
	h.until("the re-run completes", func() bool { return h.count(worker, schema.TurnComplete) == 1 })
	h.quiet()
	ri := dataAs[schema.RunInterruptedData](t, lastEntry(t, h, worker, schema.RunInterrupted))
	if n := h.count(worker, schema.RunInterrupted); n != 1 || ri.Reason != schema.ReasonProcessRestart {
		t.Fatalf("run.interrupted x%d (%+v), want one, process_restart", n, ri)
	}
	if runs := turnsTaking(h, worker, msgID); len(runs) != 2 || runs[0] != runs[1] {
		t.Fatalf("turns taking the message: %v", runs)
	}
	if n := enqueuedFrom(h, lead, worker); n != 1 {
		t.Fatalf("the lead got %d messages from the worker, want 1", n)
	}
}

// TestACrashLoopIsLeftForTheOperator: a run that is interrupted every
// time it is re-run is re-run 3 times by the resume policy, then left
// (interrupted_startup), and the start says why.
func TestACrashLoopIsLeftForTheOperator(t *testing.T) {
	h := newHarness(t, withAutoResume)
	started := make(chan struct{}, 8)
	h.prov.Register("work", blockFirst(100, started))
	_, worker, _ := startWorker(t, h, started)
	for i := 0; i < 3; i++ {
		h.crash(faultfs.ProcessCrash)
		<-started // the automatic re-run runs, and is cut off again
	}
	h.crash(faultfs.ProcessCrash)
	h.quiet()
	if by := byOf(h, worker); len(by) != 3 {
		t.Fatalf("run.resumed by %v, want 3 by auto", by)
	}
	if s := h.statusOf(worker); s != "interrupted_startup" {
		t.Fatalf("status %s, want interrupted_startup", s)
	}
	left := false
	for _, r := range h.c.Interrupted() { // the lead's turn on "half done" may have been cut off too
		left = left || (r.AgentID == worker && !r.Rerun && strings.Contains(r.Left, "3 times"))
	}
	if !left {
		t.Fatalf("Interrupted() = %+v; want the worker's run left after 3 re-runs", h.c.Interrupted())
	}
}

// TestManualPolicyLeavesTheRunAndItsMessages: under manual, the start
// re-runs nothing and the agent takes no wake turn with its run's
// message; agent.resume then re-runs it with that message.
func TestManualPolicyLeavesTheRunAndItsMessages(t *testing.T) {
	h := newHarness(t) // manual
	started := make(chan struct{}, 4)
	h.prov.Register("work", blockFirst(1, started))
	_, worker, msgID := startWorker(t, h, started)
	h.crash(faultfs.ProcessCrash)
	h.quiet()
	if n := h.count(worker, schema.TurnStart); n != 1 {
		t.Fatalf("turn.start x%d after the start under manual, want the interrupted one only", n)
	}
	if got := h.c.Interrupted(); len(got) != 1 || got[0].Rerun || !strings.Contains(got[0].Left, "manual") {
		t.Fatalf("Interrupted() = %+v", got)
	}
	res, err := h.c.Resume(context.Background(), worker, "", "")
	if err != nil || res.Err != nil || res.Response != "all done" {
		t.Fatalf("resume: %+v, %v", res, err)
	}
	if runs := turnsTaking(h, worker, msgID); len(runs) != 2 || runs[0] != runs[1] {
		t.Fatalf("turns taking the message: %v", runs)
	}
	if by := byOf(h, worker); len(by) != 1 || by[0] != schema.ByOperator {
		t.Fatalf("run.resumed by %v, want one by operator", by)
	}
}

// waitOrGiveUp is a program that waits for an answer and says what came.
func waitOrGiveUp(ctx context.Context, tr *inproc.Turn) (string, error) {
	r, err := tr.Call("await_input", map[string]any{"kind": "approval", "prompt": "ship it?", "timeout": 60})
	if err != nil {
		return "", err
	}
	if r["timed_out"] == true {
		return "gave up waiting: " + r["error"].(string), nil
	}
	return "answered: " + r["response"].(string), nil
}

// TestTimedOutWaitIsReRunWithTheTimeout: under auto a wait that times out
// is re-run by itself with its await_input answered {"error": "wait timed
// out", "timed_out": true}; under manual agent.resume without a token
// does the same; the old token stays refused.
func TestTimedOutWaitIsReRunWithTheTimeout(t *testing.T) {
	for _, auto := range []bool{true, false} {
		name := map[bool]string{true: "auto", false: "manual"}[auto]
		t.Run(name, func(t *testing.T) {
			setup := []func(*harness){withFakeClock}
			if auto {
				setup = append(setup, withAutoResume)
			}
			h := newHarness(t, setup...)
			h.prov.Register("wait", waitOrGiveUp)
			id := h.create("asker", "", "wait")
			sus := h.send(id, "go")
			if sus.Status != "suspended" {
				t.Fatalf("send: %+v", sus)
			}
			h.clock.Advance(61 * time.Second)
			if !auto {
				h.quiet()
				if n := h.count(id, schema.TurnComplete); n != 0 {
					t.Fatalf("manual: the timed-out run moved by itself (turn.complete x%d)", n)
				}
				res, err := h.c.Resume(context.Background(), id, "", "")
				if err != nil || res.Response != "gave up waiting: wait timed out" {
					t.Fatalf("resume without a token: %+v, %v", res, err)
				}
			}
			h.until("the re-run completes", func() bool { return h.count(id, schema.TurnComplete) == 1 })
			done := dataAs[schema.TurnCompleteData](t, lastEntry(t, h, id, schema.TurnComplete))
			if done.Response != "gave up waiting: wait timed out" {
				t.Fatalf("the re-run answered %q", done.Response)
			}
			rr := dataAs[schema.RunResumedData](t, lastEntry(t, h, id, schema.RunResumed))
			if want := map[bool]string{true: schema.ByAuto, false: schema.ByOperator}[auto]; !rr.TimedOut || rr.By != want {
				t.Fatalf("run.resumed %+v", rr)
			}
			if _, err := h.c.Resume(context.Background(), id, sus.Token, "late"); !strings.Contains(errText(err), "token") {
				t.Fatalf("the old token: %v", err)
			}
		})
	}
}

// TestResumeTreeReRunsASubtreeOrAll: agent.resume recursive re-runs the
// interrupted runs under an agent and no others; all re-runs the rest.
func TestResumeTreeReRunsASubtreeOrAll(t *testing.T) {
	h := newHarness(t) // manual: nothing moves by itself
	started := make(chan struct{}, 8)
	var turns atomic.Int32
	h.prov.Register("work", func(ctx context.Context, tr *inproc.Turn) (string, error) {
		if turns.Add(1) <= 2 { // a's and b's first turns: cut off by the crash
			started <- struct{}{}
			<-ctx.Done()
			return "", ctx.Err()
		}
		return "done", nil
	})
	h.prov.Register("hold", func(ctx context.Context, tr *inproc.Turn) (string, error) {
		started <- struct{}{}
		<-ctx.Done()
		return "", ctx.Err()
	})
	lead := h.create("lead", "", "echo")
	a := h.create("a", lead, "work")
	b := h.create("b", lead, "work")
	other := h.create("other", "", "hold")
	for _, kid := range []string{"a", "b"} {
		h.tool(lead, "send_message", map[string]any{"recipient": kid, "text": "go"})
	}
	go func() { _, _ = h.c.Send(context.Background(), other, "go", "", "", nil) }()
	for i := 0; i < 3; i++ {
		<-started
	}
	h.crash(faultfs.ProcessCrash)
	runs, err := h.c.ResumeTree(context.Background(), lead, false)
	if err != nil || len(runs) != 2 || !runs[0].Rerun || !runs[1].Rerun || runs[0].AgentID != a || runs[1].AgentID != b {
		t.Fatalf("ResumeTree(lead) = %+v, %v; want a and b re-run", runs, err)
	}
	h.until("a and b complete", func() bool { return h.count(a, schema.TurnComplete) == 1 && h.count(b, schema.TurnComplete) == 1 })
	if n := h.count(other, schema.RunResumed); n != 0 {
		t.Fatal("the subtree's resume re-ran an agent outside it")
	}
	h.prov.Register("hold", inproc.Echo)
	runs, err = h.c.ResumeTree(context.Background(), "", true)
	if err != nil || len(runs) != 1 || runs[0].AgentID != other || !runs[0].Rerun {
		t.Fatalf("ResumeTree(all) = %+v, %v; want other re-run", runs, err)
	}
	h.until("other completes", func() bool { return h.count(other, schema.TurnComplete) == 1 })
}

// errText is err's text, or "" for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
