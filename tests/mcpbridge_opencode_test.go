package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/warren-dev/warren/provider/llmfake"
)

// TestE2EOpenCodeCallsTheBridge: the real OpenCode CLI (opencode-ai,
// pinned by scripts/e2e-install.sh opencode), run inside an agent's turn
// against the fake Chat Completions server, starts `warren mcp-bridge` as a
// local MCP server, sees warren's tools as warren_*, and its call of
// warren_send_message lands once in the parent's log as a tool.call of the
// turn. WARREN_E2E=1 only; WARREN_E2E_OPENCODE overrides the binary.
func TestE2EOpenCodeCallsTheBridge(t *testing.T) {
	if os.Getenv("WARREN_E2E") != "1" {
		t.Skip("set WARREN_E2E=1 (after scripts/e2e-install.sh opencode) to run the real opencode CLI with the bridge")
	}
	bin := os.Getenv("WARREN_E2E_OPENCODE")
	if bin == "" {
		bin = e2ePath("node_modules", ".bin", "opencode")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("opencode not found at %s (run scripts/e2e-install.sh opencode): %v", bin, err)
	}
	f := llmfake.New(llmfake.OpenAI)
	defer f.Close()
	var mu sync.Mutex
	var offered []string
	f.Respond(func(r llmfake.Request) llmfake.Reply {
		if last := r.Last(); last.Role == "tool" {
			return llmfake.Reply{Text: "warren answered: " + strings.TrimSpace(last.Text)}
		}
		ts, _ := r.JSON()["tools"].([]any)
		if len(ts) == 0 {
			return llmfake.Reply{Text: "A title"} // the title request
		}
		mu.Lock()
		for _, x := range ts {
			if fn, _ := x.(map[string]any)["function"].(map[string]any); fn != nil {
				offered = append(offered, fn["name"].(string))
			}
		}
		mu.Unlock()
		return llmfake.Reply{Calls: []llmfake.Call{{ID: "call_bridge_01", Name: "warren_send_message",
			Args: `{"recipient":"lead","text":"hello from OpenCode"}`}}}
	})

	d, lead, worker := bridgeTeam(t)
	work := filepath.Join(d.dir, "work")
	if err := os.MkdirAll(work, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(map[string]any{
		"provider": map[string]any{"mock": map[string]any{"npm": "@ai-sdk/openai-compatible",
			"options": map[string]any{"baseURL": f.BaseURL(), "apiKey": "dummy"},
			"models":  map[string]any{"mock-model": map[string]any{"tool_call": true}}}},
		"model": "mock/mock-model", "small_model": "mock/mock-model",
		"mcp": map[string]any{"warren": map[string]any{"type": "local", "command": []string{procBinary, "mcp-bridge"},
			"environment": map[string]string{"WARREN_SOCKET": "${WARREN_SOCKET}", "WARREN_AGENT_CREDENTIAL": "${WARREN_AGENT_CREDENTIAL}"}}},
	})
	msg, _ := json.Marshal(map[string]any{
		"run": []string{bin, "run", "--format", "json", "-m", "mock/mock-model", "Tell the lead hello."},
		"cwd": work,
		"env": map[string]string{"OPENCODE_CONFIG_CONTENT": string(cfg), "OPENCODE_DISABLE_MODELS_FETCH": "1",
			"OPENCODE_DISABLE_AUTOUPDATE": "1", "HOME": work, "XDG_DATA_HOME": filepath.Join(work, ".data"),
			"XDG_CONFIG_HOME": filepath.Join(work, ".config"), "XDG_CACHE_HOME": filepath.Join(work, ".cache"),
			"XDG_STATE_HOME": filepath.Join(work, ".state")},
	})
	res := d.callN("agent.send", map[string]any{"agent_id": worker, "message": string(msg)})
	var run struct {
		Stdout, Stderr string
		Exit           int
	}
	if err := json.Unmarshal([]byte(res["response"].(string)), &run); err != nil {
		t.Fatalf("turn response %v: %v", res, err)
	}
	t.Logf("opencode printed:\n%s\nstderr:\n%s", run.Stdout, run.Stderr)
	if run.Exit != 0 {
		t.Fatalf("opencode exited %d", run.Exit)
	}
	mu.Lock()
	got := strings.Join(offered, " ")
	mu.Unlock()
	if !strings.Contains(" "+got+" ", " warren_send_message ") {
		t.Fatalf("the model was offered %q, not warren_send_message", got)
	}
	var msgID string
	for _, e := range logEvents(t, d, worker) {
		if data, _ := e["data"].(map[string]any); e["event"] == "tool.call" && data["tool"] == "send_message" {
			r, _ := data["result"].(map[string]any)
			msgID, _ = r["message_id"].(string)
		}
	}
	if msgID == "" || !strings.Contains(run.Stdout, msgID) {
		t.Fatalf("no send_message tool.call whose result reached opencode (message id %q)", msgID)
	}
	if n := enqueuedCount(t, d, lead, msgID); n != 1 {
		t.Fatalf("the lead's log has %d message.enqueued for %s, want 1", n, msgID)
	}
}
