package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestACPAgentOnAWorker: an acp agent (the fake agent CLI) runs on a
// worker; its `warren mcp-bridge` reaches warren's tools through the
// worker's socket for that agent, and the call runs at the daemon as a
// call of the agent's running turn: logged, and delivered.
func TestACPAgentOnAWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test starts a daemon and warren worker processes; run without -short")
	}
	dir := t.TempDir()
	bin := fakeACPAgent(t, dir)
	state := filepath.Join(dir, "acpstate")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(map[string]any{"providers": map[string]any{"fake": map[string]any{"type": "acp", "command": []string{bin},
		"env": map[string]string{"FAKEACP_STATE": state}}}})
	f := startFleetOf(t, "fake", 0, 4, string(cfg))
	f.startWith("w1", 4, f.url, string(cfg))
	f.waitListed("w1")
	d := f.d
	id := d.createAgent("a", "fake", "", "")
	if !strings.Contains(d.Output(), "session placed: agent="+id+" worker=w1") {
		t.Fatalf("the acp agent was not placed on w1:\n%s", tailString(d.Output(), 4000))
	}
	res := d.callN("agent.send", map[string]any{"agent_id": id,
		"message": `@tool send_message {"recipient":"USER","text":"hello from a worker over ACP"}`})
	if r := str(res["response"]); !strings.Contains(r, "tool send_message ->") || !strings.Contains(r, "message_id") {
		t.Fatalf("turn = %v, want the bridge's send_message result", res)
	}
	runID, callRun := "", "<none>"
	for _, e := range agentLog(t, d, id) {
		data, _ := e["data"].(map[string]any)
		switch str(e["event"]) {
		case "turn.start":
			runID = str(data["run_id"])
		case "tool.call":
			if data["tool"] == "send_message" {
				callRun = str(data["run_id"])
			}
		}
	}
	if runID == "" || callRun != runID {
		t.Fatalf("the bridge's call is in run %q, the turn is run %q: want the call logged in the turn", callRun, runID)
	}
	found := false
	for _, m := range d.callN("inbox.list", nil)["messages"].([]any) {
		found = found || str(m.(map[string]any)["text"]) == "hello from a worker over ACP"
	}
	if !found {
		t.Fatal("the message the acp agent sent from the worker is not in the USER inbox")
	}
	// await_input through the bridge suspends the run, as locally; the
	// answer re-runs it (on the worker) and the call returns it.
	res = d.callN("agent.send", map[string]any{"agent_id": id,
		"message": `@tool await_input {"kind":"approval","prompt":"go on?","timeout":3600}`})
	token, _ := res["token"].(string)
	if res["status"] != "suspended" || token == "" {
		t.Fatalf("turn: %v, want it suspended on the bridge's await_input", res)
	}
	res = d.callN("agent.resume", map[string]any{"agent_id": id, "token": token, "response": "yes"})
	if r := str(res["response"]); !strings.Contains(r, "tool await_input ->") || !strings.Contains(r, "yes") {
		t.Fatalf("the re-run after the answer: %v, want await_input to return the operator's yes", res)
	}
	// The call went through the worker's socket for the agent (the
	// daemon knows no credential of a worker's process).
	if _, err := os.Stat(filepath.Join(d.dir, "worker-home-w1", "worker-w1", "agents", id, "agent.sock")); err != nil {
		t.Fatalf("the worker serves no socket for the agent: %v", err)
	}
}

// TestWorkspaceSuspendedACPTurnOnAWorkerComesHome: an acp agent with a
// workspace runs on a worker, writes to its workspace and then suspends
// its run with await_input through its bridge (the worker's socket for
// the agent). What it wrote is handed back: the daemon's worktree holds
// it while the run waits (what the operator inspects before answering),
// and the answer with keep_workspace re-runs the run on it: after one more
// turn the workspace is what a local agent's is after the same turns.
func TestWorkspaceSuspendedACPTurnOnAWorkerComesHome(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test starts a daemon and warren worker processes; run without -short")
	}
	t.Parallel()
	run := func(onWorker bool) (waiting, after string) {
		dir := t.TempDir()
		bin := fakeACPAgent(t, dir)
		state := filepath.Join(dir, "acpstate")
		if err := os.MkdirAll(state, 0o700); err != nil {
			t.Fatal(err)
		}
		repo := gitRepo(t, dir)
		remote := filepath.Join(dir, "agents.git")
		runGit(t, dir, "clone", "-q", "--bare", repo, remote)
		entry := map[string]any{"type": "acp", "command": []string{bin}, "env": map[string]string{"FAKEACP_STATE": state}}
		if onWorker {
			entry["worker"] = map[string]any{"remote": remote}
		}
		cfg, _ := json.Marshal(map[string]any{"providers": map[string]any{"fake": entry}})
		f := startFleetOf(t, "fake", 0, 4, string(cfg))
		f.startWith("w1", 4, f.url, string(cfg))
		f.waitListed("w1")
		d := f.d
		id := str(d.callN("agent.create", map[string]any{"name": "coder", "provider": "fake",
			"workspace": map[string]any{"repo": repo}})["agent_id"])
		if placed := strings.Contains(d.Output(), "session placed: agent="+id+" worker=w1"); placed != onWorker {
			t.Fatalf("the agent placed on w1: %v, want %v\n%s", placed, onWorker, tailString(d.Output(), 4000))
		}
		notes := func() string {
			b, err := os.ReadFile(filepath.Join(d.Home, "workspaces", id, "notes.md"))
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
		d.callN("agent.send", map[string]any{"agent_id": id, "message": "@append notes.md first"})
		res := d.callN("agent.send", map[string]any{"agent_id": id, "message": "@append notes.md begun\n" +
			`@tool await_input {"kind":"approval","prompt":"go on?","timeout":3600}`})
		token, _ := res["token"].(string)
		if res["status"] != "suspended" || token == "" {
			t.Fatalf("turn: %v, want it suspended on the bridge's await_input", res)
		}
		waiting = notes()
		res = d.callN("agent.resume", map[string]any{"agent_id": id, "token": token, "response": "yes", "keep_workspace": true})
		if r := str(res["response"]); !strings.Contains(r, "tool await_input ->") || !strings.Contains(r, "yes") {
			t.Fatalf("the run after the answer: %v, want await_input to return the operator's yes", res)
		}
		d.callN("agent.send", map[string]any{"agent_id": id, "message": "@append notes.md last"})
		return waiting, notes()
	}
	awayWaiting, awayAfter := run(true)
	localWaiting, localAfter := run(false)
	if want := "# notes\nfirst\nbegun\n"; localWaiting != want || awayWaiting != want {
		t.Fatalf("while the run waits the daemon's worktree holds:\n%s\nwant what the agent wrote before it asked:\n%s(a local agent's holds:\n%s)",
			awayWaiting, want, localWaiting)
	}
	if want := "# notes\nfirst\nbegun\nbegun\nlast\n"; localAfter != want || awayAfter != want {
		t.Fatalf("after the answer and a turn on the worker the worktree holds:\n%s\nwant (the re-run's line after the first attempt's):\n%s(a local agent's holds:\n%s)", awayAfter, want, localAfter)
	}
}
