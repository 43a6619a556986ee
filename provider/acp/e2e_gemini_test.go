package acp

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/llmfake"
)

// TestE2EGeminiACPOneModelRequest: Gemini CLI 0.61.0 has no flag or
// environment variable for its retries; its one setting is
// general.maxAttempts in settings.json (default and ceiling 10). With
// "maxAttempts": 1 in the agent's settings it makes exactly one request
// when the model answers 500 or 429, and the prompt's error (code = the
// HTTP status) is a transient turn error, so warren's retry policy is the
// only one.
func TestE2EGeminiACPOneModelRequest(t *testing.T) {
	bin := e2eBin(t, "gemini")
	for _, status := range []int{500, 429} {
		t.Run(statusName(status), func(t *testing.T) {
			f := llmfake.New(llmfake.Gemini)
			defer f.Close()
			f.Respond(func(r llmfake.Request) llmfake.Reply {
				return llmfake.Reply{Status: status, Body: fmt.Sprintf(`{"error":{"code":%d,"message":"fake failure","status":"UNAVAILABLE"}}`, status)}
			})
			home := t.TempDir()
			if err := os.MkdirAll(filepath.Join(home, ".gemini"), 0o700); err != nil {
				t.Fatal(err)
			}
			settings := `{"security":{"auth":{"selectedType":"gemini-api-key"}},"general":{"maxAttempts":1,"sessionRetention":{"enabled":false}}}`
			if err := os.WriteFile(filepath.Join(home, ".gemini", "settings.json"), []byte(settings), 0o600); err != nil {
				t.Fatal(err)
			}
			e := newEnv(t)
			e.st = Settings{Command: []string{bin, "--acp", "--skip-trust", "-m", "mock-model"}}
			e.vars = append(e.vars, "GOOGLE_GEMINI_BASE_URL="+f.URL, "HOME="+home, "GEMINI_API_KEY=e2e-dummy")
			s := e.create()
			t.Cleanup(func() { _ = s.Stop() })
			resp, err := s.Send(t.Context(), "hello", provider.TurnIO{})
			if transient, _ := provider.IsTransient(err); !transient {
				t.Fatalf("response %q, err %v: want a transient error", resp, err)
			}
			if n := len(f.Requests()); n != 1 {
				t.Fatalf("gemini made %d model requests, want 1", n)
			}
			t.Logf("%v", err)
		})
	}
}
