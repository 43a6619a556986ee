package llmfake

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The fakes checked with the real clients (WARREN_E2E=1, after
// scripts/e2e-install.sh codex-acp gemini): `codex exec` (the Codex CLI
// codex-acp installs) against the Responses fake and `gemini -p` against
// the Gemini fake, each a turn with a tool call whose result goes back to
// the model and a final text.

func e2eBin(t *testing.T, name string) string {
	t.Helper()
	if os.Getenv("WARREN_E2E") != "1" {
		t.Skip("set WARREN_E2E=1 (after scripts/e2e-install.sh) to check the fakes with the real clients")
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

func runClient(t *testing.T, env []string, dir, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = nil
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", bin, args, err, out)
	}
	return string(out)
}

// TestE2ECodexAgainstResponsesFake: codex exec runs the fake's shell call
// (a function tool) and prints the fake's final text; the second request
// carries the function_call_output.
func TestE2ECodexAgainstResponsesFake(t *testing.T) {
	bin := e2eBin(t, "codex")
	s := New(Responses)
	defer s.Close()
	s.Respond(func(r Request) Reply {
		if last := r.Last(); last.Role == "tool" {
			return Reply{Text: "the tool said: " + strings.TrimSpace(last.Text), Chunk: 6}
		}
		if _, ok := r.Tool("shell"); ok {
			return Reply{Calls: []Call{{ID: "call_shell_1", Name: "shell", Args: `{"command":["echo","fake-responses-ok"]}`}}}
		}
		if tool, ok := r.Tool("exec_command"); ok {
			return Reply{Calls: []Call{tool.Call("call_shell_1", `{"cmd":"echo fake-responses-ok"}`)}}
		}
		return Reply{Text: "no shell tool offered"}
	})
	home := t.TempDir()
	cfg := `model = "mock-model"
model_provider = "mock"
approval_policy = "never"
sandbox_mode = "danger-full-access"
[model_providers.mock]
name = "mock"
base_url = "` + s.BaseURL() + `"
env_key = "MOCK_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
`
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	out := runClient(t, []string{"CODEX_HOME=" + home, "MOCK_API_KEY=dummy"}, home, bin,
		"exec", "--json", "--skip-git-repo-check", "Run echo.")
	t.Logf("codex printed:\n%s", out)
	if !strings.Contains(out, "the tool said: ") || !strings.Contains(out, "fake-responses-ok") || !strings.Contains(out, `"turn.completed"`) {
		t.Fatalf("codex did not finish the turn with the tool's output")
	}
	reqs := s.Requests()
	if len(reqs) < 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	last := reqs[len(reqs)-1].Last()
	if last.Role != "tool" || last.CallID != "call_shell_1" || !strings.Contains(last.Text, "fake-responses-ok") {
		t.Fatalf("the last request ends with %+v, want the function_call_output of call_shell_1", last)
	}
}

// TestE2EGeminiAgainstGeminiFake: gemini -p runs the fake's functionCall
// of its own list_directory tool and answers with the fake's final text,
// which quotes the tool's output (a directory the test made).
func TestE2EGeminiAgainstGeminiFake(t *testing.T) {
	bin := e2eBin(t, "gemini")
	s := New(Gemini)
	defer s.Close()
	s.Respond(func(r Request) Reply {
		if last := r.Last(); last.Role == "tool" {
			return Reply{Text: "the tool said: " + strings.TrimSpace(last.Text), Chunk: 6}
		}
		if tool, ok := r.Tool("list_directory"); ok {
			return Reply{Calls: []Call{tool.Call("", `{"dir_path":"."}`)}}
		}
		return Reply{Text: "no list_directory tool offered"}
	})
	home := t.TempDir()
	work := filepath.Join(home, "work")
	if err := os.MkdirAll(filepath.Join(home, ".gemini"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(work, "marker-dir-for-gemini"), 0o700); err != nil {
		t.Fatal(err)
	}
	settings := `{"security":{"auth":{"selectedType":"gemini-api-key"}}}`
	if err := os.WriteFile(filepath.Join(home, ".gemini", "settings.json"), []byte(settings), 0o600); err != nil {
		t.Fatal(err)
	}
	out := runClient(t, []string{"HOME=" + home, "GEMINI_API_KEY=dummy", "GOOGLE_GEMINI_BASE_URL=" + s.BaseURL()}, work, bin,
		"-p", "List the directory.", "-m", "mock-model", "--output-format", "json", "--yolo", "--skip-trust")
	t.Logf("gemini printed:\n%s", out)
	start := strings.Index(out, "{")
	var res struct {
		Response string `json:"response"`
	}
	if start < 0 || json.Unmarshal([]byte(out[start:]), &res) != nil {
		t.Fatalf("no JSON result in the output")
	}
	if !strings.Contains(res.Response, "the tool said: ") || !strings.Contains(res.Response, "marker-dir-for-gemini") {
		t.Fatalf("response %q: want the fake's final text with the tool's output", res.Response)
	}
	for _, r := range s.Requests() {
		if !strings.Contains(r.Path, "/models/mock-model:") {
			t.Fatalf("request to %s: want the model given with -m", r.Path)
		}
	}
}
