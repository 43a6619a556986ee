package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warren-dev/warren/provider/llmfake"
)

// TestE2EClaudeCodeCallsTheBridge: the real Claude Code CLI (pinned by
// scripts/e2e-install.sh claude), run inside an agent's turn against the
// fake Anthropic server, starts `warren mcp-bridge` from its MCP config,
// sees warren's tools as mcp__warren__*, and its call of
// mcp__warren__send_message lands as a tool.call of the agent's turn: the
// message is in the parent's log once and the tool result goes back to the
// model. WARREN_E2E=1 only; WARREN_E2E_CLAUDE overrides the binary.
func TestE2EClaudeCodeCallsTheBridge(t *testing.T) {
	if os.Getenv("WARREN_E2E") != "1" {
		t.Skip("set WARREN_E2E=1 (after scripts/e2e-install.sh claude) to run the real claude CLI with the bridge")
	}
	bin := os.Getenv("WARREN_E2E_CLAUDE")
	if bin == "" {
		bin = e2ePath("node_modules", ".bin", "claude")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("claude CLI not found at %s (run scripts/e2e-install.sh claude): %v", bin, err)
	}
	f := llmfake.New(llmfake.Anthropic)
	defer f.Close()
	var tools []string
	f.Respond(func(r llmfake.Request) llmfake.Reply {
		if last := r.Last(); last.Role == "tool" {
			return llmfake.Reply{Text: "warren answered: " + strings.TrimSpace(last.Text)}
		}
		body := r.JSON()
		ts, _ := body["tools"].([]any)
		for _, x := range ts {
			if m, ok := x.(map[string]any); ok {
				tools = append(tools, m["name"].(string))
			}
		}
		return llmfake.Reply{Calls: []llmfake.Call{{ID: "toolu_bridge_01", Name: "mcp__warren__send_message",
			Args: `{"recipient":"lead","text":"hello from Claude Code"}`}}}
	})

	d, lead, worker := bridgeTeam(t)
	work := filepath.Join(d.dir, "work")
	if err := os.MkdirAll(work, 0o700); err != nil {
		t.Fatal(err)
	}
	mcpConfig := filepath.Join(d.dir, "mcp.json")
	msg, _ := json.Marshal(map[string]any{
		"run": []string{bin, "-p", "Tell the lead hello.", "--output-format", "stream-json", "--verbose",
			"--model", "claude-fake-1", "--mcp-config", mcpConfig, "--strict-mcp-config",
			"--allowedTools", "mcp__warren__send_message", "--tools", ""},
		"mcp_config": mcpConfig, "bridge": procBinary, "cwd": work,
		"env": map[string]string{"ANTHROPIC_BASE_URL": f.URL, "ANTHROPIC_API_KEY": "sk-ant-e2e-dummy",
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "CLAUDE_CODE_MAX_RETRIES": "0", "DISABLE_AUTOUPDATER": "1",
			"HOME": work, "CLAUDE_CONFIG_DIR": filepath.Join(work, ".claude"), "IS_SANDBOX": "1"},
	})
	res := d.callN("agent.send", map[string]any{"agent_id": worker, "message": string(msg)})
	var run struct {
		Stdout, Stderr string
		Exit           int
	}
	if err := json.Unmarshal([]byte(res["response"].(string)), &run); err != nil {
		t.Fatalf("turn response %v: %v", res, err)
	}
	t.Logf("claude printed:\n%s\nstderr:\n%s", run.Stdout, run.Stderr)
	if run.Exit != 0 || !strings.Contains(run.Stdout, `"type":"result"`) || strings.Contains(run.Stdout, `"is_error":true`) {
		t.Fatalf("claude exited %d without a successful result", run.Exit)
	}
	found := false
	for _, name := range tools {
		found = found || name == "mcp__warren__send_message"
	}
	if !found {
		t.Fatalf("the model was offered %v, not mcp__warren__send_message", tools)
	}
	// The tool result (warren's JSON) went back to the model.
	reqs := f.Requests()
	_, msgs := reqs[len(reqs)-1].Messages()
	var msgID string
	for _, m := range msgs {
		if m.Role == "tool" && m.CallID == "toolu_bridge_01" {
			var r map[string]any
			if json.Unmarshal([]byte(strings.TrimSpace(m.Text)), &r) == nil {
				msgID, _ = r["message_id"].(string)
			}
		}
	}
	if msgID == "" {
		t.Fatalf("the last request has no tool_result with warren's message_id: %+v", msgs)
	}
	if n := enqueuedCount(t, d, lead, msgID); n != 1 {
		t.Fatalf("the lead's log has %d message.enqueued for %s, want 1", n, msgID)
	}
	runID, callRun := "", ""
	for _, e := range logEvents(t, d, worker) {
		data, _ := e["data"].(map[string]any)
		switch {
		case e["event"] == "turn.start":
			runID, _ = data["run_id"].(string)
		case e["event"] == "tool.call" && data["tool"] == "send_message":
			callRun, _ = data["run_id"].(string)
		}
	}
	if runID == "" || callRun != runID {
		t.Fatalf("the bridge's call is logged with run %q, the turn's run is %q", callRun, runID)
	}
}
