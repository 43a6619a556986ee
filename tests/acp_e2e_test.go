package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warren-dev/warren/provider/llmfake"
)

// e2eCancelBound bounds agent cancel of a turn whose model stalls: the
// provider's cancel grace (5 s) plus the kill and a margin for a loaded
// machine.
const e2eCancelBound = 20 * time.Second

// TestE2EACPAgents runs each real agent CLI (claude-agent-acp, codex-acp,
// gemini --acp, opencode acp; pinned by scripts/e2e-install.sh) as a warren
// agent of type acp on a real daemon, in front of a fake LLM speaking its
// API:
//
//  1. a turn in which the model calls warren's send_message (under the
//     agent's naming) through `warren mcp-bridge`: the call is a tool.call
//     of the turn, the message lands in the lead's log once, and the result
//     goes back to the model;
//  2. kill -9 of the daemon, which leaves no agent process; after the
//     restart the next turn restores the agent's own session natively
//     (session.restored strategy native) and the model receives the first
//     turn as an earlier message of the conversation, sent by the agent;
//  3. agent cancel while the model stalls: the turn ends within
//     e2eCancelBound, the agent abandons the model's stream, a next turn
//     works, and a clean stop leaves no process of the agent.
func TestE2EACPAgents(t *testing.T) {
	for _, a := range e2eAgents {
		t.Run(a.name, func(t *testing.T) { testE2EACPAgent(t, a) })
	}
}

func testE2EACPAgent(t *testing.T, a e2eAgent) {
	bin := e2eAgentBin(t, a)
	t.Logf("%s %s", a.pkg, e2eVersion(bin, a))
	f := llmfake.New(a.api)
	defer f.Close()
	m := newE2EModel(`{"recipient":"lead","text":"E2E hello from ` + a.name + `"}`)
	f.Respond(m.respond)

	t0 := time.Now()
	phase := func(what string) { t.Logf("%s: done at %s", what, time.Since(t0).Round(time.Millisecond)) }
	d := newTestDaemon(t, modeBinary)
	work := filepath.Join(d.dir, "work")
	if err := os.MkdirAll(work, 0o700); err != nil {
		t.Fatal(err)
	}
	writeACPConfig(t, d, map[string]map[string]any{a.name: e2eEntry(t, a, bin, f, filepath.Join(d.dir, "agenthome"))})
	leadScript := writeScripts(t, d.dir)
	d.Start()
	lead := d.createAgent("lead", "scripted", leadScript, "")
	worker := createAgentIn(t, d, "worker", a.name, a.model, lead, work)

	// 1. send_message through the bridge.
	start := time.Now()
	res := d.callN("agent.send", map[string]any{"agent_id": worker, "message": "E2E-TURN-1 CALLTOOL: tell the lead hello."})
	sessionMade := [2]time.Time{start, time.Now()} // the agent made its session in between
	resp := str(res["response"])
	t.Logf("turn 1 (%s): %q", time.Since(start).Round(time.Millisecond), resp)
	if !strings.Contains(resp, "done: ") {
		t.Fatalf("turn 1 = %v: want the model's answer after the tool result; requests without send_message:\n%s\nagent stderr:\n%s", res, m.otherTools(), agentStderr(d, worker))
	}
	var msgID, runID, callRun string
	for _, e := range logEvents(t, d, worker) {
		data, _ := e["data"].(map[string]any)
		switch {
		case e["event"] == "turn.start":
			runID = str(data["run_id"])
		case e["event"] == "tool.call" && data["tool"] == "send_message":
			callRun = str(data["run_id"])
			r, _ := data["result"].(map[string]any)
			msgID = str(r["message_id"])
		}
	}
	if msgID == "" || callRun != runID {
		t.Fatalf("no send_message tool.call of the turn (run %q, call's run %q, message %q)", runID, callRun, msgID)
	}
	if !strings.Contains(resp, msgID) {
		t.Fatalf("the model's answer %q does not quote warren's result (message %s)", resp, msgID)
	}
	if n := enqueuedCount(t, d, lead, msgID); n != 1 {
		t.Fatalf("the lead's log has %d message.enqueued for %s, want 1", n, msgID)
	}
	created := eventsNamed(t, d, worker, "session.created")
	if len(created) != 1 || str(created[0]["handle"]) == "" {
		t.Fatalf("session.created %v: want one, with the ACP session id as handle", created)
	}

	// SPEC 13: what the agent reports of its model requests over ACP (the
	// turn's total in session/prompt's result: one usage.step per turn).
	steps := usageSteps(t, d, worker)
	t.Logf("%s usage.step entries after turn 1: %v", a.name, steps)
	if reported := len(steps) > 0 && num(steps[0]["input_tokens"]) > 0; reported == a.noUsage {
		t.Errorf("%s: usage reported %v, expected %v (e2eAgent.noUsage)", a.name, reported, !a.noUsage)
	}
	phase("turn 1")
	// 2. kill -9, restart, native restore.
	if a.persisted != nil {
		handle, start := str(created[0]["handle"]), time.Now()
		for !a.persisted(filepath.Join(d.dir, "agenthome"), handle) {
			if time.Since(start) > 30*time.Second {
				t.Fatalf("%s never wrote session %s to its storage:\n%s", a.name, handle, treeOf(filepath.Join(d.dir, "agenthome")))
			}
			time.Sleep(20 * time.Millisecond) // another process's file: no signal to wait on
		}
		t.Logf("%s wrote its session file %s after the turn", a.name, time.Since(start).Round(time.Millisecond))
	}
	pid := agentPid(t, d, worker)
	d.Kill()
	d.Start()
	waitGroupEmpty(t, pid, "the agent's process group after the daemon's kill -9")
	expect := a.expectRestore(sessionMade, time.Now())
	res = d.callN("agent.send", map[string]any{"agent_id": worker, "message": "E2E-TURN-2 what did you do before?"})
	restored := eventsNamed(t, d, worker, "session.restored")
	if len(restored) != 1 {
		t.Fatalf("session.restored %v: want one", restored)
	}
	got := restored[0]["strategy"]
	if expect != "" && got != expect {
		t.Errorf("session.restored %v: want strategy %s; daemon log:\n%s\nagent home:\n%s\nknown: %s", restored, expect,
			grepLines(d.Output(), "restore"), treeOf(filepath.Join(d.dir, "agenthome")), a.restoreBug)
	}
	switch got {
	case "native":
		if r := str(res["response"]); !strings.Contains(r, "ok: E2E-TURN-2") || strings.Contains(r, "done: ") {
			t.Fatalf("turn 2 = %v; agent stderr:\n%s", res, agentStderr(d, worker))
		}
		t.Logf("restored natively by %v", restored[0]["method"])
		if last := m.lastRequest(); !earlierUserText(last, "E2E-TURN-1") {
			_, msgs := last.Messages()
			t.Fatalf("after the restore the model did not get turn 1 as an earlier message of the agent's conversation: %+v", msgs)
		}
		if len(eventsNamed(t, d, worker, "session.created")) != 1 {
			t.Fatal("the restart created a second session")
		}
	case "history":
		// The fallback (SPEC 4): a fresh session, turn 1 injected into the
		// new prompt, the turn answered.
		if r := str(res["response"]); !strings.Contains(r, "ok: E2E-TURN-2") || strings.Contains(r, "done: ") {
			t.Fatalf("turn 2 after the fallback = %v; agent stderr:\n%s", res, agentStderr(d, worker))
		}
		_, msgs := m.lastRequest().Messages()
		if len(msgs) == 0 || !strings.Contains(msgs[len(msgs)-1].Text, "E2E-TURN-1") || !strings.Contains(msgs[len(msgs)-1].Text, "E2E-TURN-2") {
			t.Fatalf("after the fallback the model's prompt does not carry turn 1 as injected history: %+v", msgs)
		}
		if n := len(eventsNamed(t, d, worker, "session.created")); n != 2 {
			t.Fatalf("%d session.created after the fallback, want 2 (the fresh session)", n)
		}
		t.Logf("restored by the fallback (fresh session, history injected): %s", a.restoreBug)
	default:
		t.Fatalf("session.restored strategy %v", got)
	}
	if n := enqueuedCount(t, d, lead, msgID); n != 1 {
		t.Fatalf("after the restart the lead's log has %d message.enqueued for %s, want 1", n, msgID)
	}

	phase("kill -9, restart, turn 2")
	// 3. cancel mid-turn.
	done := make(chan map[string]any, 1)
	go func() {
		r, err := d.Client().Call(procCtx(t), "agent.send", map[string]any{"agent_id": worker, "message": "E2E-TURN-3 STALL: take your time."})
		if err != nil {
			r = map[string]any{"error": err.Error()}
		}
		done <- r
	}()
	select {
	case <-m.stalled:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the model was never asked turn 3; agent stderr:\n%s", agentStderr(d, worker))
	}
	start = time.Now()
	d.callN("agent.cancel", map[string]any{"agent_id": worker})
	var cancelled map[string]any
	select {
	case cancelled = <-done:
	case <-time.After(e2eCancelBound):
		t.Fatalf("agent cancel: the turn had not ended after %s", e2eCancelBound)
	}
	took := time.Since(start)
	t.Logf("cancel: the turn ended in %s: %v", took.Round(time.Millisecond), cancelled)
	select {
	case <-f.Released():
	case <-time.After(e2eCancelBound):
		t.Fatal("the agent never abandoned the stalled model stream after the cancel")
	}
	if n := len(eventsNamed(t, d, worker, "turn.cancelled")); n != 1 {
		t.Fatalf("%d turn.cancelled entries, want 1", n)
	}
	phase("cancel")
	res = d.callN("agent.send", map[string]any{"agent_id": worker, "message": "E2E-TURN-4 still there?"})
	if r := str(res["response"]); !strings.Contains(r, "ok: E2E-TURN-4") {
		_, msgs := m.lastRequest().Messages()
		t.Fatalf("turn 4 after the cancel = %v; the model's last request: %+v", res, msgs)
	}
	phase("turn 4")
	pid = agentPid(t, d, worker)
	if err := d.Stop(); err != nil {
		t.Fatal(err)
	}
	waitGroupEmpty(t, pid, "the agent's process group after a clean stop")
	phase("stop")
}

// e2eVersion is the installed package's version (its package.json).
func e2eVersion(bin string, a e2eAgent) string {
	b, err := os.ReadFile(filepath.Join(filepath.Dir(bin), "..", a.pkg, "package.json"))
	var pj struct{ Version string }
	if err != nil || json.Unmarshal(b, &pj) != nil {
		return "(version unknown)"
	}
	return pj.Version
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// treeOf lists the files under dir with their sizes (for failure texts).
func treeOf(dir string) string {
	var b strings.Builder
	_ = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			fmt.Fprintf(&b, "%s %d\n", strings.TrimPrefix(p, dir), fi.Size())
		}
		return nil
	})
	return b.String()
}
