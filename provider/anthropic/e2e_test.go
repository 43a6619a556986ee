package anthropic_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warren-dev/warren/provider/llmfake"
)

// TestE2EClaudeCLIAgainstTheFake runs the real Claude Code CLI (pinned by
// scripts/e2e-install.sh) against the fake Anthropic server: if Anthropic's
// own client accepts the fake's streams (text, a tool_use with streamed
// input_json_delta, and the tool_result round trip), the fake speaks the
// real wire format. Only with WARREN_E2E=1 (it needs node, npm and the
// install); WARREN_E2E_CLAUDE overrides the binary's path.
func TestE2EClaudeCLIAgainstTheFake(t *testing.T) {
	if os.Getenv("WARREN_E2E") != "1" {
		t.Skip("set WARREN_E2E=1 (after scripts/e2e-install.sh) to run the real claude CLI against the fake")
	}
	bin := os.Getenv("WARREN_E2E_CLAUDE")
	if bin == "" {
		dir := os.Getenv("WARREN_E2E_DIR")
		if dir == "" {
			dir, _ = filepath.Abs("../../.e2e")
		}
		bin = filepath.Join(dir, "node_modules", ".bin", "claude")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("claude CLI not found at %s (run scripts/e2e-install.sh): %v", bin, err)
	}
	work := t.TempDir()
	note := filepath.Join(work, "note.txt")
	if err := os.WriteFile(note, []byte("the fake speaks the wire format\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := llmfake.New(llmfake.Anthropic)
	defer f.Close()
	f.Respond(func(r llmfake.Request) llmfake.Reply {
		last := r.Last()
		if last.Role == "tool" {
			return llmfake.Reply{Text: "The note says: " + strings.TrimSpace(last.Text), InputTokens: 900, CachedTokens: 600}
		}
		return llmfake.Reply{Text: "Reading it.", Calls: []llmfake.Call{{ID: "toolu_e2e_01", Name: "Read",
			Args: fmt.Sprintf(`{"file_path":%q}`, note)}}}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-p", "Read note.txt and tell me what it says.",
		"--output-format", "stream-json", "--verbose", "--model", "claude-fake-1", "--allowedTools", "Read")
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "ANTHROPIC_BASE_URL="+f.URL, "ANTHROPIC_API_KEY=sk-ant-e2e-dummy",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "CLAUDE_CODE_MAX_RETRIES=0", "DISABLE_AUTOUPDATER=1",
		"HOME="+work, "CLAUDE_CONFIG_DIR="+filepath.Join(work, ".claude"), "IS_SANDBOX=1")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	t.Logf("claude printed:\n%s\nstderr:\n%s", out.String(), errOut.String())
	if err != nil {
		t.Fatalf("claude: %v", err)
	}
	if !strings.Contains(out.String(), `"type":"result"`) || !strings.Contains(out.String(), "the fake speaks the wire format") ||
		strings.Contains(out.String(), `"is_error":true`) {
		t.Fatalf("no successful result with the tool's output")
	}
	if n := f.Count(); n < 2 {
		t.Fatalf("%d requests: the tool_result never came back", n)
	}
	reqs := f.Requests()
	_, msgs := reqs[len(reqs)-1].Messages()
	var sawResult bool
	for _, m := range msgs {
		if m.Role == "tool" && m.CallID == "toolu_e2e_01" && strings.Contains(m.Text, "the fake speaks the wire format") {
			sawResult = true
		}
	}
	if !sawResult {
		t.Fatalf("the last request has no tool_result for toolu_e2e_01: %+v", msgs)
	}
}
