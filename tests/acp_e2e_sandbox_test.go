package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/warren-dev/warren/provider/llmfake"
)

// escapeModel drives a real agent CLI in a sandbox: on E2E-ESCAPE it runs
// the escape script with the agent's own shell tool, then calls warren's
// send_message (through the MCP bridge, the agent's own socket), then
// answers; any other prompt gets "ok: <prompt>".
type escapeModel struct {
	mu       sync.Mutex
	script   string
	requests []llmfake.Request
}

func (m *escapeModel) respond(r llmfake.Request) llmfake.Reply {
	var bash llmfake.Tool
	found := false
	for _, t := range r.Tools() {
		if t.Name == "Bash" || t.Name == "bash" {
			bash, found = t, true
		}
	}
	send, ok := r.Tool("send_message")
	if !found || !ok {
		return llmfake.Reply{Text: "E2E title"}
	}
	_, msgs := r.Messages()
	pi, tools := promptIndex(msgs, "E2E-")
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests = append(m.requests, r)
	switch {
	case pi < 0:
		return llmfake.Reply{Text: "no E2E prompt"}
	case !strings.Contains(msgs[pi].Text, "E2E-ESCAPE"):
		return llmfake.Reply{Text: "ok: " + msgs[pi].Text[strings.Index(msgs[pi].Text, "E2E-"):]}
	case tools == 0:
		args, _ := json.Marshal(map[string]string{"command": m.script, "description": "Try the ways out"})
		return llmfake.Reply{Calls: []llmfake.Call{bash.Call("call_escape", string(args))}}
	case tools == 1:
		return llmfake.Reply{Calls: []llmfake.Call{send.Call("call_send", `{"recipient":"USER","text":"E2E from inside the sandbox"}`)}}
	}
	return llmfake.Reply{Text: "E2E escape checked"}
}

func (m *escapeModel) last() llmfake.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.requests[len(m.requests)-1]
}

// TestE2ESandbox is issue 34's proof with real agent CLIs: Claude Code
// (claude-agent-acp) and OpenCode, each sandboxed with a workspace, run
// shell commands that try the ways out (a planted file, the operator's
// ~/.ssh, a write outside, the agents' logs, the daemon's socket, a
// setsid sleeper); every one fails, warren's own tool works through the
// MCP bridge, the sleeper is gone once the agent's process ends, and the
// CLI's session, kept in the private home, is restored natively after a
// daemon restart.
func TestE2ESandbox(t *testing.T) {
	for _, name := range []string{"claude", "opencode"} {
		t.Run(name, func(t *testing.T) { testE2ESandbox(t, e2eAgentNamed(name)) })
	}
}

func testE2ESandbox(t *testing.T, a e2eAgent) {
	bin := e2eAgentBin(t, a)
	d := newTestDaemon(t, modeBinary)
	// The operator's home, with a key the agent must not read.
	opHome := filepath.Join(d.dir, "operator")
	writeFile(t, filepath.Join(opHome, ".ssh", "id_e2e"), "PRIVATE KEY\n")
	d.shell = "HOME=" + opHome + "; export HOME"
	secret := filepath.Join(d.dir, "outside", "secret.txt")
	writeFile(t, secret, "the operator's secret\n")
	tag := fmt.Sprintf("86401.%d", os.Getpid())
	checks := []struct{ name, cmd string }{
		{"read-secret", "cat " + secret},
		{"read-ssh", "cat " + filepath.Join(opHome, ".ssh", "id_e2e")},
		{"write-outside", "echo x > " + filepath.Join(d.dir, "outside", "planted.txt")},
		{"write-etc", "echo x > /etc/warren-e2e"},
		{"list-logs", "ls " + filepath.Join(d.Home, "agents") + "/*/events.jsonl"},
		{"daemon-socket", `python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])' ` + filepath.Join(d.Home, "daemon.sock")},
	}
	var script strings.Builder
	for _, c := range checks {
		fmt.Fprintf(&script, "if %s >/dev/null 2>&1; then echo %s:escaped; else echo %s:denied; fi >> escape.txt; ", c.cmd, c.name, c.name)
	}
	// Its output away from the tool's pipe, or a shell tool that reads to
	// EOF (OpenCode's) waits for the sleeper.
	fmt.Fprintf(&script, "setsid sh -c 'sleep %s &' </dev/null >/dev/null 2>&1; echo own:ok >> escape.txt", tag)
	m := &escapeModel{script: script.String()}
	f := llmfake.New(a.api)
	defer f.Close()
	f.Respond(m.respond)

	entry := e2eEntry(t, a, bin, f, filepath.Join(d.dir, "agenthome"))
	env := entry["env"].(map[string]string)
	for k := range env { // the CLI's files go to the private home
		if k == "HOME" || k == "CLAUDE_CONFIG_DIR" || strings.HasPrefix(k, "XDG_") {
			delete(env, k)
		}
	}
	entry["permissions"] = "allow"
	entry["sandbox"] = map[string]any{"type": "bwrap"}
	writeACPConfig(t, d, map[string]map[string]any{a.name: entry})
	repo := gitRepo(t, d.dir)
	d.Start()
	id := str(d.callN("agent.create", map[string]any{"name": "boxed", "provider": a.name, "model": a.model,
		"workspace": map[string]any{"repo": repo}})["agent_id"])

	res := d.callN("agent.send", map[string]any{"agent_id": id, "message": "E2E-ESCAPE: try the ways out."})
	if !strings.Contains(str(res["response"]), "E2E escape checked") {
		t.Fatalf("the escape turn = %v; stderr:\n%s", res, agentStderr(d, id))
	}
	got := readFile(t, filepath.Join(d.Home, "workspaces", id, "escape.txt"))
	t.Logf("inside %s's sandbox:\n%s", a.name, got)
	for _, c := range checks {
		if !strings.Contains(got, c.name+":denied") {
			t.Errorf("%s: %s", c.name, got)
		}
	}
	if !strings.Contains(got, "own:ok") {
		t.Errorf("the script did not finish: %s", got)
	}
	if !strings.Contains(readLog(t, d, id), "E2E from inside the sandbox") {
		t.Error("warren's send_message through the bridge is not in the agent's log")
	}
	// What the CLI reports of its model requests (SPEC 13: usage.step
	// where an agent reports usage, turns only where it does not).
	steps := usageSteps(t, d, id)
	t.Logf("%s reported usage: %v", a.name, steps)
	if len(steps) == 0 || num(steps[0]["input_tokens"]) <= 0 {
		t.Errorf("%s reported no usage in its session/prompt result: its turns would be counted, not its tokens", a.name)
	}
	priv := filepath.Join(d.Home, "agents", id, "home")
	if entries, err := os.ReadDir(priv); err != nil || len(entries) == 0 {
		t.Errorf("the CLI kept nothing in its private home (%v): its session cannot be there", err)
	}

	// A clean restart: the CLI's session, in the private home, is loaded
	// natively by a new process in a new sandbox.
	if err := d.Stop(); err != nil {
		t.Fatal(err)
	}
	waitNoSleeper(t, tag, "after the daemon stopped")
	d.Start()
	res = d.callN("agent.send", map[string]any{"agent_id": id, "message": "E2E-AGAIN what did you do?"})
	if !strings.Contains(str(res["response"]), "ok: E2E-AGAIN") {
		t.Fatalf("the turn after the restart = %v; stderr:\n%s", res, agentStderr(d, id))
	}
	restored := eventsNamed(t, d, id, "session.restored")
	if len(restored) != 1 || restored[0]["strategy"] != "native" {
		t.Fatalf("session.restored %v, want one, native", restored)
	}
	if !earlierUserText(m.last(), "E2E-ESCAPE") {
		t.Fatal("after the restore the model did not get the first turn as an earlier message")
	}
}
