package engine

import (
	"strings"
	"testing"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/schema"
)

// TestCrashBetweenATimedOutResumeAndItsRerun: a wait timed out, the resume
// policy logged run.resumed (timed_out) and the daemon died before the
// re-run's turn.start. The run is no longer waiting (its run.resumed ends
// the wait), so the next start marks it interrupted once, with
// process_restart, and lists it interrupted_startup: SPEC 11.5, exactly one
// run.interrupted per interrupted run. (The long crash fuzzer found it:
// the expired token left the run counted as waiting, and no start marked
// it.)
func TestCrashBetweenATimedOutResumeAndItsRerun(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.noWake = true })
	id := h.create("a", "", "echo")
	h.stop()
	lg, err := eventlog.Open(h.fs, "/home/agents/"+id+"/events.jsonl", eventlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	run, tok := "5c6df0a9ca5c78e81c7a2ee6b01b1559", "tok_4c9c38c6c8a0c5ca"
	if _, err := lg.AppendBatch([]eventlog.Record{
		{Event: schema.TurnStart, Data: schema.TurnStartData{RunID: run, Turn: 1, BootID: "an-earlier-boot", Prompt: "ask", Provider: "inproc", Model: "echo", MessageIDs: []string{}}},
		{Event: schema.RunWaiting, Data: map[string]any{"run_id": run, "wait_kind": "question", "prompt": "go on?", "token_id": tok, "deadline": "2026-11-22T13:00:00Z", "turn": 1}},
		{Event: schema.TokenMinted, Data: schema.TokenData{TokenID: tok, RunID: run}},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := lg.AppendBatch([]eventlog.Record{
		{Event: schema.RunInterrupted, Data: schema.RunInterruptedData{RunID: run, Reason: schema.ReasonWaitTimeout}},
		{Event: schema.TokenExpired, Data: schema.TokenData{TokenID: tok, RunID: run}},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := lg.Append(schema.RunResumed, schema.RunResumedData{RunID: run, By: schema.ByAuto, TimedOut: true}); err != nil {
		t.Fatal(err)
	}
	lg.Close()
	h.start()
	es := h.entries(id)
	last := es[len(es)-1]
	if last.Event != schema.RunInterrupted || !strings.Contains(string(last.Data), run) || !strings.Contains(string(last.Data), schema.ReasonProcessRestart) {
		t.Fatalf("the log ends with %s %s; want run.interrupted (process_restart) for the resumed run", last.Event, last.Data)
	}
	if st := h.statusOf(id); st != "interrupted_startup" {
		t.Fatalf("status %q; want interrupted_startup", st)
	}
	h.restart()
	if n := h.count(id, schema.RunInterrupted); n != 2 {
		t.Fatalf("%d run.interrupted after a second start; want 2 (the timeout's and this restart's, once)", n)
	}
}
