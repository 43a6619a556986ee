package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warren-dev/warren/protocol"
)

// A team of scripted workers (issue 32): two workers under a lead, each
// mid-turn on its own FIFO.
type team struct {
	d            *testDaemon
	lead, w1, w2 string
}

func newTeam(t *testing.T, d *testDaemon) *team {
	t.Helper()
	script := writeScripts(t, d.dir)
	tm := &team{d: d}
	tm.lead = d.createAgent("lead", "scripted", script, "")
	tm.w1 = d.createAgent("w1", "scripted", script, "lead")
	tm.w2 = d.createAgent("w2", "scripted", script, "lead")
	return tm
}

// busy starts both workers' turns, each blocked reading its FIFO, and
// returns the write ends the test holds open: closing one ends its turn,
// so close them only once the daemon has stopped.
func (tm *team) busy(t *testing.T) (writers []*os.File) {
	t.Helper()
	for _, w := range []string{"w1", "w2"} {
		wr, _ := blockScriptedTurn(t, tm.d, w)
		writers = append(writers, wr)
	}
	return writers
}

// closeAll closes fs.
func closeAll(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

// finish lets both workers' (re-)runs finish and waits for their
// turn.complete.
func (tm *team) finish(t *testing.T) {
	t.Helper()
	for _, w := range []string{"w1", "w2"} {
		finishFIFO(t, tm.d, w)
	}
	for _, id := range []string{tm.w1, tm.w2} {
		waitEvent(t, tm.d, id, "turn.complete", func(ev string, _ map[string]any) bool { return ev == "turn.complete" })
	}
}

// checkOnce checks each worker's log: one turn.complete, one
// run.interrupted with the reason, re-run by, never turn.cancelled.
func (tm *team) checkOnce(t *testing.T, reason, by string) {
	t.Helper()
	for _, id := range []string{tm.w1, tm.w2} {
		c := eventCounts(t, tm.d, id)
		if c["turn.complete"] != 1 || c["run.interrupted"] != 1 || c["run.resumed"] != 1 || c["turn.cancelled"] != 0 {
			t.Fatalf("worker %s's log: %v; want one interruption, one re-run, one completion", id, c)
		}
		log := readLog(t, tm.d, id)
		if !strings.Contains(log, `"reason":"`+reason+`"`) || !strings.Contains(log, `"by":"`+by+`"`) {
			t.Fatalf("worker %s's log lacks reason %s or by %s:\n%s", id, reason, by, log)
		}
	}
}

// readLog is agent id's log file.
func readLog(t *testing.T, d *testDaemon, id string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(d.Home, "agents", id, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestStopAndStartMovesTheTeamOn: `warren daemon stop` with two workers
// mid-turn, then `warren daemon start`: the start says what it found and
// re-ran; every run completes once with no operator command; exactly one
// run.interrupted per run; a second stop and start change nothing more.
func TestStopAndStartMovesTheTeamOn(t *testing.T) {
	t.Parallel()
	d := startTestDaemon(t, modeBinary)
	tm := newTeam(t, d)
	writers := tm.busy(t)
	runCLI(t, d.Home, "daemon", "stop").want(t, 0, "warren daemon stop")
	<-d.Exited()
	closeAll(writers)
	d.Start()
	st := runCLI(t, d.Home, "daemon", "status").want(t, 0, "warren daemon status")
	if !strings.Contains(st.stdout, "this start found 2 interrupted run(s)") || !strings.Contains(st.stdout, "lead/w1") ||
		!strings.Contains(st.stdout, "(shutdown): re-run") {
		t.Fatalf("daemon status after the start:\n%s", st.stdout)
	}
	tm.finish(t)
	tm.checkOnce(t, "shutdown", "auto")
	inbox := runCLI(t, d.Home, "inbox", "--peek").want(t, 0, "warren inbox --peek")
	if !strings.Contains(inbox.stdout, "interrupted run") || !strings.Contains(inbox.stdout, "lead/w2") {
		t.Fatalf("the USER inbox does not say what the start found:\n%s", inbox.stdout)
	}
	if err := d.Stop(); err != nil {
		t.Fatal(err)
	}
	d.Start()
	tm.checkOnce(t, "shutdown", "auto")
}

// TestKilledTeamMovesOnByItself: the same after a kill -9.
func TestKilledTeamMovesOnByItself(t *testing.T) {
	t.Parallel()
	d := startTestDaemon(t, modeBinary)
	tm := newTeam(t, d)
	writers := tm.busy(t)
	d.Kill()
	closeAll(writers)
	d.Start()
	tm.finish(t)
	tm.checkOnce(t, "process_restart", "auto")
}

// TestManualPolicyThenResumeAll: under "resume": "manual" a start re-runs
// nothing and says how; `warren agent resume --all` re-runs every
// interrupted run.
func TestManualPolicyThenResumeAll(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, modeBinary)
	if err := os.MkdirAll(d.Home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d.Home, "config.json"), []byte(`{"resume": "manual"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	d.Start()
	tm := newTeam(t, d)
	writers := tm.busy(t)
	d.Kill()
	closeAll(writers)
	d.Start()
	st := runCLI(t, d.Home, "daemon", "status").want(t, 0, "warren daemon status")
	if !strings.Contains(st.stdout, "left: the resume policy of scripted is manual") || !strings.Contains(st.stdout, "warren agent resume --all") {
		t.Fatalf("daemon status under manual:\n%s", st.stdout)
	}
	list := runCLI(t, d.Home, "agent", "list").want(t, 0, "warren agent list")
	if strings.Count(list.stdout, "interrupted_startup") != 2 {
		t.Fatalf("agent list under manual:\n%s", list.stdout)
	}
	res := runCLI(t, d.Home, "agent", "resume", "--all").want(t, 0, "warren agent resume --all")
	if strings.Count(res.stdout, ": re-run") != 2 {
		t.Fatalf("warren agent resume --all:\n%s", res.stdout)
	}
	tm.finish(t)
	tm.checkOnce(t, "process_restart", "operator")
}

// TestDrainLetsTurnsFinish: `warren daemon stop --drain` lets a running
// turn finish (turn.complete, no run.interrupted) while new sends get
// code 6 and reads are served.
func TestDrainLetsTurnsFinish(t *testing.T) {
	t.Parallel()
	d := startTestDaemon(t, modeBinary)
	script := writeScripts(t, d.dir)
	id := d.createAgent("busy", "scripted", script, "")
	other := d.createAgent("other", "scripted", script, "")
	w, sendErr := blockScriptedTurn(t, d, "busy")
	stop := make(chan cliResult, 1)
	go func() { stop <- runCLI(t, d.Home, "daemon", "stop", "--drain=60s") }()
	// Drain has begun once a new send is refused; reads still work.
	waitDraining(t, d, other)
	if st := d.callN("agent.inspect", map[string]any{"agent_id": id}); st["status"] != "running" {
		t.Fatalf("agent.inspect while draining: %v", st)
	}
	_, _ = w.Write([]byte("finish"))
	w.Close()
	if err := <-sendErr; err != nil {
		t.Fatalf("the send whose turn finished during the drain: %v", err)
	}
	(<-stop).want(t, 0, "warren daemon stop --drain")
	c := eventCounts(t, d, id)
	if c["turn.complete"] != 1 || c["run.interrupted"] != 0 {
		t.Fatalf("log after a drained stop: %v; want the turn completed, not interrupted", c)
	}
	if c := eventCounts(t, d, other); c["turn.start"] != 0 {
		t.Fatalf("the refused send started a turn: %v", c)
	}
}

// waitDraining asks daemon.status until it says the drain has begun, then
// checks that a send to agent is refused with code 6.
func waitDraining(t *testing.T, d *testDaemon, agent string) {
	t.Helper()
	for {
		st, err := d.Client().Call(procCtx(t), "daemon.status", nil)
		if err != nil {
			t.Fatalf("daemon.status while the stop drains: %v", err)
		}
		if st["draining"] == true {
			break
		}
	}
	_, err := d.Client().Call(procCtx(t), "agent.send", map[string]any{"agent_id": agent, "message": "should be refused"})
	wantCode(t, "agent.send while draining", err, protocol.CodeUnavailable)
	if !strings.Contains(err.Error(), "stopping") {
		t.Fatalf("the refusal while draining: %v", err)
	}
}

// TestTimedOutWaitMovesOn: a scripted agent's await_input times out (1 s);
// the resume policy re-runs the run with the wait answered {"error":
// "wait timed out", "timed_out": true}; the old token stays refused.
func TestTimedOutWaitMovesOn(t *testing.T) {
	t.Parallel()
	d := startTestDaemon(t, modeBinary)
	script := writeScripts(t, d.dir)
	id := d.createAgent("asker", "scripted", script, "")
	res := d.callN("agent.send", map[string]any{"agent_id": id, "message": "quick ship it?"})
	if res["status"] != "suspended" {
		t.Fatalf("send: %v", res)
	}
	waitEvent(t, d, id, "turn.complete", func(ev string, _ map[string]any) bool { return ev == "turn.complete" })
	log := readLog(t, d, id)
	for _, want := range []string{`"reason":"wait_timeout"`, `"timed_out":true`, `"by":"auto"`, `"response":"no answer: wait timed out"`} {
		if !strings.Contains(log, want) {
			t.Fatalf("the log lacks %s:\n%s", want, log)
		}
	}
	_, err := d.Client().Call(procCtx(t), "agent.resume", map[string]any{"agent_id": id, "token": res["token"], "response": "late"})
	wantCode(t, "the timed-out wait's token", err, protocol.CodeTokenRejected)
}

// TestCrashLoopStopsAfterThreeReRuns: a run cut off by a kill -9 at every
// re-run is re-run 3 times by the resume policy, then left
// interrupted_startup for the operator.
func TestCrashLoopStopsAfterThreeReRuns(t *testing.T) {
	t.Parallel()
	d := startTestDaemon(t, modeBinary)
	script := writeScripts(t, d.dir)
	id := d.createAgent("busy", "scripted", script, "")
	// The write end stays open until the daemon is killed: closed before,
	// the script would read its end of file and finish the turn first.
	w, _ := blockScriptedTurn(t, d, "busy")
	fifo := filepath.Join(d.dir, "fifo-busy")
	for i := 0; i < 3; i++ {
		d.Kill()
		w.Close()
		d.Start()
		// The re-run opened the FIFO again: it runs; kill it there.
		var err error
		if w, err = os.OpenFile(fifo, os.O_WRONLY, 0); err != nil {
			t.Fatal(err)
		}
	}
	d.Kill()
	w.Close()
	d.Start()
	c := eventCounts(t, d, id)
	if c["run.resumed"] != 3 || c["run.interrupted"] != 4 || c["turn.complete"] != 0 {
		t.Fatalf("log after 4 kills: %v; want 3 automatic re-runs and the run left", c)
	}
	if st := d.callN("agent.inspect", map[string]any{"agent_id": id}); st["status"] != "interrupted_startup" {
		t.Fatalf("status after the crash loop: %v", st["status"])
	}
	status := runCLI(t, d.Home, "daemon", "status").want(t, 0, "warren daemon status")
	if !strings.Contains(status.stdout, "re-run 3 times") {
		t.Fatalf("daemon status does not say why the run is left:\n%s", status.stdout)
	}
}

// TestInboxWaitReturnsWhenTheRootAnswers: `warren inbox --wait` blocks
// until a root agent sends to USER, then prints that message.
func TestInboxWaitReturnsWhenTheRootAnswers(t *testing.T) {
	t.Parallel()
	d := startTestDaemon(t, modeBinary)
	d.createAgent("lead", "inproc", "echo", "")
	out := make(chan cliResult, 1)
	go func() { out <- runCLI(t, d.Home, "inbox", "--wait=60s") }()
	// Wait until the CLI's inbox.list is waiting: a peek with no message.
	if got := runCLI(t, d.Home, "inbox", "--peek").want(t, 0, "inbox --peek"); !strings.Contains(got.stdout, "no messages") {
		t.Fatalf("inbox --peek before the answer: %s", got.stdout)
	}
	d.callN("tool.call", map[string]any{"agent_id": "lead", "tool": "send_message",
		"arguments": map[string]any{"recipient": "USER", "text": "the team's answer"}})
	r := (<-out).want(t, 0, "inbox --wait")
	if !strings.Contains(r.stdout, "the team's answer") {
		t.Fatalf("inbox --wait printed:\n%s", r.stdout)
	}
	none := runCLI(t, d.Home, "inbox", "--wait=1s").want(t, 1, "inbox --wait=1s on an empty inbox")
	if !strings.Contains(none.stderr, "no message arrived") {
		t.Fatalf("inbox --wait=1s: %s", none.stderr)
	}
}
