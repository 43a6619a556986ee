package acp

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/llmfake"
)

// e2eBin finds an agent CLI installed by scripts/e2e-install.sh (in
// $WARREN_E2E_DIR, else .e2e/ in the repository).
func e2eBin(t *testing.T, name string) string {
	t.Helper()
	if os.Getenv("WARREN_E2E") != "1" {
		t.Skip("set WARREN_E2E=1 (after scripts/e2e-install.sh) to run the real agent CLIs")
	}
	dir := os.Getenv("WARREN_E2E_DIR")
	if dir == "" {
		dir, _ = filepath.Abs("../../.e2e")
	}
	bin := filepath.Join(dir, "node_modules", ".bin", name)
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s not found at %s (run scripts/e2e-install.sh): %v", name, bin, err)
	}
	return bin
}

// TestE2EClaudeAgentACP drives the real claude-agent-acp adapter against
// the fake Anthropic server: a streamed turn, the session restored in a
// fresh process (session/resume, the history resent to the model), and a
// cancel while the model stalls.
func TestE2EClaudeAgentACP(t *testing.T) {
	bin := e2eBin(t, "claude-agent-acp")
	f := llmfake.New(llmfake.Anthropic)
	defer f.Close()
	var mu sync.Mutex
	stall := false
	stalled := make(chan struct{}, 1)
	f.Respond(func(r llmfake.Request) llmfake.Reply {
		mu.Lock()
		defer mu.Unlock()
		if stall {
			select {
			case stalled <- struct{}{}:
			default:
			}
			return llmfake.Reply{Text: "never finished", Stall: true}
		}
		return llmfake.Reply{Text: "hello from the fake model", Chunk: 5}
	})
	home := t.TempDir()
	e := newEnv(t)
	e.st = Settings{Command: []string{bin}, Mode: "default"}
	e.vars = []string{"ANTHROPIC_BASE_URL=" + f.URL, "ANTHROPIC_API_KEY=sk-ant-e2e-dummy", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"CLAUDE_CODE_MAX_RETRIES=0", "DISABLE_AUTOUPDATER=1", "HOME=" + home, "CLAUDE_CONFIG_DIR=" + filepath.Join(home, ".claude"),
		"IS_SANDBOX=1", "ANTHROPIC_MODEL=claude-fake-1"}
	e.opts.WarrenBinary = ""
	s := e.create()
	c := newChunks()
	resp, err := s.Send(context.Background(), "Say hello.", provider.TurnIO{OnChunk: c.add})
	if err != nil || !strings.Contains(resp, "hello from the fake model") || len(c.list) == 0 {
		t.Fatalf("turn: %q (chunks %q), %v", resp, c.list, err)
	}
	h := s.Handle()
	_ = s.Stop()

	r, err := e.provider().Restore(context.Background(), e.spec(), nil, h)
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	rs := r.(*Session)
	t.Cleanup(func() { _ = rs.Stop() })
	t.Logf("restored by %s", rs.RestoredBy())
	if resp, _ := send(t, rs, "Again."); !strings.Contains(resp, "hello from the fake model") || strings.Count(resp, "hello from the fake model") != 1 {
		t.Fatalf("after the restore: %q (the replay must not be output)", resp)
	}
	reqs := f.Requests()
	users := 0
	_, msgs := reqs[len(reqs)-1].Messages()
	for _, m := range msgs {
		if m.Role == "user" && strings.Contains(m.Text, "Say hello.") {
			users++
		}
	}
	if users == 0 {
		t.Fatalf("the restored session did not resend the first turn to the model: %+v", msgs)
	}

	mu.Lock()
	stall = true
	mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-stalled; cancel() }()
	start := time.Now()
	_, err = rs.Send(ctx, "Take your time.", provider.TurnIO{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancel: %v", err)
	}
	t.Logf("cancel answered in %s", time.Since(start))
}

// TestE2EClaudeAgentACPPermissions: the real adapter asks permission for
// its Bash tool (mode default); deny reaches the model as a refused tool
// call, allow runs it, and ask suspends the run (the prompt is cancelled).
func TestE2EClaudeAgentACPPermissions(t *testing.T) {
	bin := e2eBin(t, "claude-agent-acp")
	f := llmfake.New(llmfake.Anthropic)
	defer f.Close()
	f.Respond(func(r llmfake.Request) llmfake.Reply {
		if last := r.Last(); last.Role == "tool" {
			return llmfake.Reply{Text: "tool said: " + strings.TrimSpace(last.Text)}
		}
		return llmfake.Reply{Calls: []llmfake.Call{{ID: "toolu_bash_01", Name: "Bash", Args: `{"command":"mkdir -p made-by-e2e && echo warren-e2e-ran","description":"make a directory"}`}}}
	})
	for _, policy := range []string{PermDeny, PermAllow, PermAsk} {
		t.Run(policy, func(t *testing.T) {
			home := t.TempDir()
			e := newEnv(t)
			e.st = Settings{Command: []string{bin}, Mode: "default", Permissions: policy}
			e.vars = []string{"ANTHROPIC_BASE_URL=" + f.URL, "ANTHROPIC_API_KEY=sk-ant-e2e-dummy", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
				"CLAUDE_CODE_MAX_RETRIES=0", "DISABLE_AUTOUPDATER=1", "HOME=" + home, "CLAUDE_CONFIG_DIR=" + filepath.Join(home, ".claude"),
				"IS_SANDBOX=1", "ANTHROPIC_MODEL=claude-fake-1"}
			e.opts.WarrenBinary = ""
			s := e.create()
			tools := &fakeTools{fn: func(string, map[string]any) (map[string]any, error) { return nil, provider.ErrRunSuspended }}
			resp, err := s.Send(context.Background(), "Run the echo.", provider.TurnIO{Tools: tools})
			t.Logf("response %q, err %v, calls %v", resp, err, tools.calls)
			switch policy {
			case PermAllow:
				if err != nil || !strings.Contains(resp, "warren-e2e-ran") {
					t.Fatalf("allow: %q, %v", resp, err)
				}
			case PermDeny:
				if err != nil || strings.Contains(resp, "tool said: warren-e2e-ran") || !strings.Contains(resp, "tool said:") {
					t.Fatalf("deny: %q, %v", resp, err)
				}
			case PermAsk:
				if !errors.Is(err, provider.ErrRunSuspended) || len(tools.calls) != 1 {
					t.Fatalf("ask: %q, %v", resp, err)
				}
			}
		})
	}
}

// TestE2EClaudeAgentACPWarrenToolIsAllowed: under the deny policy, the
// real adapter's permission request for warren's own tool (an MCP tool of
// the server passed in session/new, here the fake agent's stand-in for
// warren mcp-bridge) is allowed, and the call reaches the server with the
// socket and the credential.
func TestE2EClaudeAgentACPWarrenToolIsAllowed(t *testing.T) {
	bin := e2eBin(t, "claude-agent-acp")
	f := llmfake.New(llmfake.Anthropic)
	defer f.Close()
	f.Respond(func(r llmfake.Request) llmfake.Reply {
		if last := r.Last(); last.Role == "tool" {
			return llmfake.Reply{Text: "tool said: " + strings.TrimSpace(last.Text)}
		}
		return llmfake.Reply{Calls: []llmfake.Call{{ID: "toolu_warren_01", Name: "mcp__warren__send_message",
			Args: `{"recipient":"lead","text":"hello"}`}}}
	})
	home := t.TempDir()
	e := newEnv(t)
	e.st = Settings{Command: []string{bin}, Mode: "default", Permissions: PermDeny}
	var logs syncBuffer
	e.opts.Logger = hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Debug})
	e.vars = []string{"ANTHROPIC_BASE_URL=" + f.URL, "ANTHROPIC_API_KEY=sk-ant-e2e-dummy", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"CLAUDE_CODE_MAX_RETRIES=0", "DISABLE_AUTOUPDATER=1", "HOME=" + home, "CLAUDE_CONFIG_DIR=" + filepath.Join(home, ".claude"),
		"IS_SANDBOX=1", "ANTHROPIC_MODEL=claude-fake-1"}
	s := e.create()
	resp, _ := send(t, s, "Tell the lead hello.")
	if !strings.Contains(resp, `"tool":"send_message"`) || !strings.Contains(resp, `"credential_set":true`) {
		t.Fatalf("response %q: the warren tool must run under the deny policy; agent stderr:\n%s", resp, e.launch.stderr.String())
	}
	if !strings.Contains(logs.String(), "permission for warren's own tool allowed") {
		t.Fatalf("the adapter asked no permission for the warren tool, so the test proves nothing; log:\n%s", logs.String())
	}
	t.Logf("provider log:\n%s", logs.String())
}

// TestE2EOpenCodeACP drives the real `opencode acp` against the fake Chat
// Completions server: a streamed turn, the session restored in a fresh
// process, a cancel while the model stalls.
func TestE2EOpenCodeACP(t *testing.T) {
	bin := e2eBin(t, "opencode")
	f := llmfake.New(llmfake.OpenAI)
	defer f.Close()
	var mu sync.Mutex
	stall := false
	stalled := make(chan struct{}, 1)
	f.Respond(func(r llmfake.Request) llmfake.Reply {
		mu.Lock()
		defer mu.Unlock()
		if stall {
			select {
			case stalled <- struct{}{}:
			default:
			}
			return llmfake.Reply{Text: "never finished", Stall: true}
		}
		return llmfake.Reply{Text: "hello from the fake model", Chunk: 5}
	})
	home := t.TempDir()
	e := newEnv(t)
	e.st = Settings{Command: []string{bin, "acp"}}
	cfg := `{"provider":{"mock":{"npm":"@ai-sdk/openai-compatible","options":{"baseURL":"` + f.BaseURL() +
		`","apiKey":"dummy"},"models":{"mock-model":{"tool_call":true}}}},"model":"mock/mock-model","small_model":"mock/mock-model"}`
	e.vars = []string{"OPENCODE_CONFIG_CONTENT=" + cfg, "OPENCODE_DISABLE_MODELS_FETCH=1", "OPENCODE_DISABLE_AUTOUPDATE=1",
		"HOME=" + home, "XDG_DATA_HOME=" + filepath.Join(home, "data"), "XDG_CONFIG_HOME=" + filepath.Join(home, "config"),
		"XDG_CACHE_HOME=" + filepath.Join(home, "cache"), "XDG_STATE_HOME=" + filepath.Join(home, "state")}
	e.opts.WarrenBinary = ""
	s := e.create()
	c := newChunks()
	resp, err := s.Send(context.Background(), "Say hello.", provider.TurnIO{OnChunk: c.add})
	if err != nil || !strings.Contains(resp, "hello from the fake model") {
		t.Fatalf("turn: %q (chunks %q), %v; stderr:\n%s", resp, c.list, err, e.launch.stderr.String())
	}
	h := s.Handle()
	_ = s.Stop()
	r, err := e.provider().Restore(context.Background(), e.spec(), nil, h)
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	rs := r.(*Session)
	t.Cleanup(func() { _ = rs.Stop() })
	t.Logf("restored by %s", rs.RestoredBy())
	if resp, _ := send(t, rs, "Again."); strings.Count(resp, "hello from the fake model") != 1 {
		t.Fatalf("after the restore: %q (the replay must not be output)", resp)
	}
	found := false
	for _, m := range f.Requests()[len(f.Requests())-1:] {
		found = strings.Contains(string(m.Body), "Say hello.")
	}
	if !found {
		t.Fatal("the restored session did not resend the first turn to the model")
	}
	mu.Lock()
	stall = true
	mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-stalled; cancel() }()
	start := time.Now()
	if _, err := rs.Send(ctx, "Take your time.", provider.TurnIO{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancel: %v", err)
	}
	t.Logf("cancel answered in %s", time.Since(start))
}
