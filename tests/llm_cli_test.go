package tests

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/warren-dev/warren/provider/llmfake"
)

// TestLLMCLIDaemonStartPassesTheEnvironment: `warren daemon start`
// backgrounds the daemon with the caller's environment, so the entry's key
// variable is set in the daemon (warren providers says so, never showing
// the key) and a turn through the CLI reaches the fake with the key; agent
// list --wide shows the tokens; agent create without a model on an entry
// without one exits 1 naming the entry.
func TestLLMCLIDaemonStartPassesTheEnvironment(t *testing.T) {
	oa := llmfake.New(llmfake.OpenAI)
	defer oa.Close()
	oa.Push(llmfake.Reply{Text: "hello from the fake", InputTokens: 321, OutputTokens: 12})
	dir, err := os.MkdirTemp("", "w")
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "h")
	t.Cleanup(func() {
		if b, err := os.ReadFile(filepath.Join(home, "daemon.pid")); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		_ = os.RemoveAll(dir)
	})
	d := &testDaemon{Home: home}
	llmHome(t, d, oa, nil, nil) // sets the key variable in this process's environment
	runCLI(t, home, "daemon", "start").want(t, 0, "daemon start")
	defer runCLI(t, home, "daemon", "stop")

	out := runCLI(t, home, "providers").want(t, 0, "providers").stdout
	if !strings.Contains(out, "$"+llmKeyEnv+" set") || strings.Contains(out, llmKey) || !strings.Contains(out, oa.BaseURL()) {
		t.Fatalf("warren providers:\n%s", out)
	}
	r := runCLI(t, home, "agent", "create", "loc", "--provider", "ollama").want(t, 1, "create without a model")
	if !strings.Contains(r.stderr+r.stdout, `"ollama"`) || !strings.Contains(r.stderr+r.stdout, "--model") {
		t.Fatalf("create without a model: %s %s", r.stdout, r.stderr)
	}
	runCLI(t, home, "agent", "create", "lead", "--provider", "openai").want(t, 0, "create")
	if out := runCLI(t, home, "agent", "send", "lead", "hi").want(t, 0, "send").stdout; !strings.Contains(out, "hello from the fake") {
		t.Fatalf("send printed %q", out)
	}
	if h := oa.Requests()[0].Header.Get("Authorization"); h != "Bearer "+llmKey {
		t.Fatalf("the daemon started in the background sent Authorization %q", h)
	}
	if out := runCLI(t, home, "agent", "list", "--wide").want(t, 0, "list --wide").stdout; !strings.Contains(out, "TOKENS") || !strings.Contains(out, "321/12/0") {
		t.Fatalf("agent list --wide:\n%s", out)
	}
	if out := runCLI(t, home, "agent", "inspect", "lead").want(t, 0, "inspect").stdout; !strings.Contains(out, "tokens:") {
		t.Fatalf("agent inspect:\n%s", out)
	}
}
