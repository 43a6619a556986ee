package acp

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/llmfake"
)

// codexE2E sets up the real codex-acp in front of f under policy, its
// custom model provider with Codex's own retries off.
func codexE2E(t *testing.T, f *llmfake.Server, policy string) *env {
	bin := e2eBin(t, "codex-acp")
	home := t.TempDir()
	cx := filepath.Join(home, ".codex")
	if err := os.MkdirAll(cx, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := "model = \"mock-model\"\nmodel_provider = \"mock\"\n[model_providers.mock]\nname = \"mock\"\nbase_url = \"" + f.BaseURL() +
		"\"\nenv_key = \"CODEX_E2E_API_KEY\"\nwire_api = \"responses\"\nrequest_max_retries = 0\nstream_max_retries = 0\n"
	if err := os.WriteFile(filepath.Join(cx, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	e.st = Settings{Command: []string{bin}, Mode: "workspace-write", Permissions: policy}
	e.vars = append(e.vars, "CODEX_HOME="+cx, "HOME="+home, "CODEX_E2E_API_KEY=e2e-dummy")
	return e
}

// TestE2ECodexACPWarrenToolUnderAsk: the real codex-acp asks permission
// for warren's MCP tool with an empty title (the call is described only by
// the tool_call update before it); under ask it runs with no operator
// wait. A shell command named like that call (`mcp.warren.send_message`,
// which codex titles exactly as it titles the MCP call) becomes an
// operator wait.
func TestE2ECodexACPWarrenToolUnderAsk(t *testing.T) {
	f := llmfake.New(llmfake.Responses)
	defer f.Close()
	f.Respond(func(r llmfake.Request) llmfake.Reply {
		if last := r.Last(); last.Role == "tool" {
			return llmfake.Reply{Text: "tool said: " + strings.TrimSpace(last.Text)}
		}
		tool, ok := r.Tool("send_message")
		switch {
		case !ok || tool.Namespace != "mcp__warren":
			return llmfake.Reply{Text: "no warren tool offered"}
		case strings.Contains(string(r.Body), "SHELL"):
			return llmfake.Reply{Calls: []llmfake.Call{{ID: "call_sh", Name: "exec_command",
				Args: `{"cmd":"mcp.warren.send_message","sandbox_permissions":"require_escalated","justification":"send"}`}}}
		}
		return llmfake.Reply{Calls: []llmfake.Call{tool.Call("call_w1", `{"recipient":"lead","text":"hello"}`)}}
	})
	e := codexE2E(t, f, PermAsk)
	s := e.create()
	t.Cleanup(func() { _ = s.Stop() })
	waits := &fakeTools{fn: func(string, map[string]any) (map[string]any, error) { return nil, provider.ErrRunSuspended }}
	resp, err := s.Send(t.Context(), "Tell the lead hello.", provider.TurnIO{Tools: waits})
	if err != nil || !strings.Contains(resp, "send_message") || !strings.Contains(resp, "credential_set") || len(waits.calls) != 0 {
		t.Fatalf("warren's tool under ask: response %q, err %v, operator waits %v; agent stderr:\n%s", resp, err, waits.calls, e.launch.stderr.String())
	}
	resp, err = s.Send(t.Context(), "SHELL run it.", provider.TurnIO{Tools: waits})
	if !errors.Is(err, provider.ErrRunSuspended) || len(waits.calls) != 1 {
		t.Fatalf("the look-alike shell command: response %q, err %v, waits %v: want an operator wait", resp, err, waits.calls)
	}
	if p, _ := waits.calls[0]["args"].(map[string]any)["prompt"].(string); !strings.Contains(p, "mcp.warren.send_message") {
		t.Fatalf("wait prompt %q", p)
	}
}

// TestE2ECodexACPOneModelRequest: with request_max_retries and
// stream_max_retries 0 on its model provider, codex makes exactly one
// request when the model answers 500 or 429, and the turn is a transient
// error (codex-acp reports the failure as text and end_turn; see
// codexerr.go), so warren's retry policy is the only one.
func TestE2ECodexACPOneModelRequest(t *testing.T) {
	for _, status := range []int{500, 429} {
		t.Run(statusName(status), func(t *testing.T) {
			f := llmfake.New(llmfake.Responses)
			defer f.Close()
			f.Respond(func(r llmfake.Request) llmfake.Reply {
				return llmfake.Reply{Status: status, Body: `{"error":{"message":"fake failure","type":"server_error"}}`}
			})
			e := codexE2E(t, f, PermAsk)
			s := e.create()
			t.Cleanup(func() { _ = s.Stop() })
			resp, err := s.Send(t.Context(), "hello", provider.TurnIO{})
			transient, _ := provider.IsTransient(err)
			if !errors.Is(err, ErrModelFailed) || !transient {
				t.Fatalf("response %q, err %v: want a transient ErrModelFailed", resp, err)
			}
			if n := len(f.Requests()); n != 1 {
				t.Fatalf("codex made %d model requests, want 1", n)
			}
			t.Logf("%v", err)
		})
	}
}

func statusName(status int) string {
	return map[int]string{500: "500", 429: "429"}[status]
}
