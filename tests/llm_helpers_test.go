package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/warren-dev/warren/protocol"
	"github.com/warren-dev/warren/provider/llmfake"
)

// llmKeyEnv and llmKey: the key the daemon reads for the fake entries; the
// tests check it is written nowhere.
const (
	llmKeyEnv = "WARREN_TEST_LLM_KEY"
	llmKey    = "sk-warren-test-7f3a9c1e5b2d4860-NEVER-WRITE-ME"
)

// llmHome writes a config.json pointing the openai (and anthropic) entries
// at fake servers, with extra top-level settings.
func llmHome(t *testing.T, d *testDaemon, oa, an *llmfake.Server, extra map[string]any) {
	t.Helper()
	t.Setenv(llmKeyEnv, llmKey)
	provs := map[string]any{
		"openai": map[string]any{"base_url": oa.BaseURL(), "api_key_env": llmKeyEnv, "model": "fake-gpt", "timeout_s": 60},
	}
	if an != nil {
		provs["anthropic"] = map[string]any{"base_url": an.BaseURL(), "api_key_env": llmKeyEnv, "model": "fake-claude"}
	}
	cfg := map[string]any{"providers": provs, "retry_base_delay_ms": 10}
	for k, v := range extra {
		cfg[k] = v
	}
	data, _ := json.Marshal(cfg)
	if err := os.MkdirAll(d.Home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d.Home, "config.json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

var agentNameRE = regexp.MustCompile(`You are the agent "([^"]+)"`)

// agentOf names the agent a request is for, from its identity block.
func agentOf(r llmfake.Request) string {
	sys, _ := r.Messages()
	if m := agentNameRE.FindStringSubmatch(sys); m != nil {
		return m[1]
	}
	return ""
}

// requestsOf returns the requests made for one agent, in order.
func requestsOf(f *llmfake.Server, name string) []llmfake.Request {
	var out []llmfake.Request
	for _, r := range f.Requests() {
		if agentOf(r) == name {
			out = append(out, r)
		}
	}
	return out
}

// userTexts are the user messages of a request, in order.
func userTexts(r llmfake.Request) []string {
	_, msgs := r.Messages()
	var out []string
	for _, m := range msgs {
		if m.Role == "user" {
			out = append(out, m.Text)
		}
	}
	return out
}

// waitEvent follows an agent's events from seq 0 until pred holds.
func waitEvent(t *testing.T, d *testDaemon, agent string, what string, pred func(ev string, data map[string]any) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(procCtx(t), 60*time.Second)
	defer cancel()
	cl, err := protocol.Dial(ctx, d.Sock)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	errDone := errors.New("done")
	err = cl.Stream(ctx, "events.subscribe", map[string]any{"agent_id": agent, "since_seq": 0}, func(f protocol.Frame) error {
		ev, _ := f.Event["event"].(string)
		data, _ := f.Event["data"].(map[string]any)
		if pred(ev, data) {
			return errDone
		}
		return nil
	})
	if !errors.Is(err, errDone) {
		t.Fatalf("waiting for %s of %s: %v", what, agent, err)
	}
}

// checkKeyNowhere fails if the key appears in any file under the home or
// in the daemon's output (daemon.log).
func checkKeyNowhere(t *testing.T, d *testDaemon) {
	t.Helper()
	files := 0
	err := filepath.WalkDir(d.Home, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || e.Type()&fs.ModeSocket != 0 {
			return nil
		}
		data, rerr := os.ReadFile(path)
		if rerr != nil {
			return nil
		}
		files++
		if bytes.Contains(data, []byte(llmKey)) {
			t.Errorf("the API key is written in %s", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 3 {
		t.Fatalf("only %d files under the home: the check proves nothing", files)
	}
	if strings.Contains(d.Output(), llmKey) {
		t.Errorf("the API key is in the daemon's output (daemon.log)")
	}
}
