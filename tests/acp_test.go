package tests

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// fakeACPAgent builds provider/acp's fake ACP agent into dir.
func fakeACPAgent(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "fakeagent")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/warren-dev/warren/provider/acp/internal/fakeagent").CombinedOutput()
	if err != nil {
		t.Fatalf("building the fake ACP agent: %v\n%s", err, out)
	}
	return bin
}

// acpHome writes a config.json with an acp entry "fake" running the fake
// agent (its sessions in DIR/acpstate; FAKEACP_CHILD: each agent process
// starts a child in its group).
func acpHome(t *testing.T, d *testDaemon) {
	t.Helper()
	bin := fakeACPAgent(t, d.dir)
	state := filepath.Join(d.dir, "acpstate")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := map[string]any{"providers": map[string]any{"fake": map[string]any{"type": "acp", "command": []string{bin},
		"env": map[string]string{"FAKEACP_STATE": state, "FAKEACP_CHILD": "1"}}}}
	data, _ := json.Marshal(cfg)
	if err := os.MkdirAll(d.Home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d.Home, "config.json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// agentPid returns the pid of the agent's recorded process (procs/).
func agentPid(t *testing.T, d *testDaemon, agentID string) int {
	t.Helper()
	recs, err := os.ReadDir(filepath.Join(d.Home, "procs"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if rest, ok := strings.CutPrefix(r.Name(), agentID+"."); ok {
			pid, err := strconv.Atoi(strings.TrimSuffix(rest, ".json"))
			if err == nil {
				return pid
			}
		}
	}
	t.Fatalf("no process record of agent %s in procs/ (%v)", agentID, recs)
	return 0
}

// TestACPAgentsSurviveKill9 runs acp agents on a real daemon: a permission
// request under the default ask policy becomes an operator wait; the
// daemon is killed (-9) with another agent mid-turn; after the restart no
// process of the killed daemon's agents is left, the wait is still listed,
// the operator's answer (by token id) re-runs the turn with the session
// restored natively, and the agent mid-turn has its own session back.
func TestACPAgentsSurviveKill9(t *testing.T) {
	d := newTestDaemon(t, modeBinary)
	acpHome(t, d)
	d.Start()
	lead := d.createAgent("lead", "fake", "", "")
	res := d.callN("agent.send", map[string]any{"agent_id": lead, "message": "@say checking\n@permission deploy prod\n@say deployed"})
	wait, _ := res["wait"].(map[string]any)
	if res["status"] != "suspended" || wait["kind"] != "permission" || !strings.Contains(str(wait["prompt"]), "deploy prod") {
		t.Fatalf("send = %v, want a permission wait", res)
	}

	worker := d.createAgent("worker", "fake", "", "")
	if r := d.callN("agent.send", map[string]any{"agent_id": worker, "message": "remember me"}); r["response"] != "turn 1: remember me" {
		t.Fatalf("worker's first turn = %v", r)
	}
	go func() {
		// Answered with an error when the daemon is killed.
		_, _ = d.Client().Call(procCtx(t), "agent.send", map[string]any{"agent_id": worker, "message": "@say working\n@hang"})
	}()
	waitEvent(t, d, worker, "the second turn's start", func(ev string, data map[string]any) bool {
		return ev == "turn.start" && strings.Contains(str(data["prompt"]), "@hang")
	})
	pid := agentPid(t, d, worker)

	d.Kill()
	d.Start()
	waitGroupEmpty(t, pid, "the worker's agent process group after the daemon's kill -9 and restart")

	ws, _ := d.callN("waits.list", nil)["waits"].([]any)
	if len(ws) != 1 {
		t.Fatalf("waits.list after the restart = %v, want the lead's permission wait", ws)
	}
	w, _ := ws[0].(map[string]any)
	if w["kind"] != "permission" {
		t.Fatalf("wait %v", w)
	}
	out := d.callN("agent.resume", map[string]any{"agent_id": lead, "token_id": str(w["token_id"]), "response": "allow"})
	if r := str(out["response"]); !strings.Contains(r, "permission deploy prod: selected allow;") || !strings.HasSuffix(r, "deployed") {
		t.Fatalf("resume = %v", out)
	}
	// The worker's interrupted turn is abandoned by a new one; its own
	// session (one completed turn) comes back through session/load.
	if r := d.callN("agent.send", map[string]any{"agent_id": worker, "message": "again"}); r["response"] != "turn 2: again" {
		t.Fatalf("worker after the restart = %v, want its own session back", r)
	}
	if err := d.Stop(); err != nil {
		t.Fatal(err)
	}
	if recs, _ := os.ReadDir(filepath.Join(d.Home, "procs")); len(recs) != 0 {
		t.Fatalf("procs/ holds %d records after a clean stop", len(recs))
	}
}
