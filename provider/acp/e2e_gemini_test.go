package acp

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// TestE2EGeminiACPLoadMinute pins gemini-cli 0.61.0's session/load bug
// (docs/DECISIONS.md, "Agent CLIs: warren's tools under ask"): a load in
// a fresh process within the UTC minute the session was created fails
// ("No previous sessions found for this project.", ErrCannotRestore, so
// warren falls back to the history), and a load in a later minute
// restores natively, the model getting the first turn as an earlier
// message. It waits for the wall clock (up to two minutes): the bug is a
// function of it.
func TestE2EGeminiACPLoadMinute(t *testing.T) {
	bin := e2eBin(t, "gemini")
	f := llmfake.New(llmfake.Gemini)
	defer f.Close()
	f.Respond(func(r llmfake.Request) llmfake.Reply { return llmfake.Reply{Text: "ok from the fake model"} })
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".gemini"), 0o700); err != nil {
		t.Fatal(err)
	}
	settings := `{"security":{"auth":{"selectedType":"gemini-api-key"}},"general":{"maxAttempts":1}}`
	if err := os.WriteFile(filepath.Join(home, ".gemini", "settings.json"), []byte(settings), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	e.st = Settings{Command: []string{bin, "--acp", "--skip-trust", "-m", "mock-model"}}
	e.vars = append(e.vars, "GOOGLE_GEMINI_BASE_URL="+f.URL, "HOME="+home, "GEMINI_API_KEY=e2e-dummy")
	minute := func(t time.Time) time.Time { return t.UTC().Truncate(time.Minute) }
	// session makes a session with one turn, waits for Gemini to write the
	// turn to its chat file (another process's file: polled) and returns
	// the handle and the minute in the file's name.
	session := func(marker string) (string, time.Time) {
		s := e.create()
		send(t, s, marker+" first turn")
		deadline := time.Now().Add(30 * time.Second)
		for {
			files, _ := filepath.Glob(filepath.Join(home, ".gemini", "tmp", "*", "chats", "session-*.jsonl"))
			for _, file := range files {
				b, _ := os.ReadFile(file)
				if !strings.Contains(string(b), marker+" first turn") {
					continue
				}
				name := strings.TrimPrefix(filepath.Base(file), "session-")
				m, err := time.Parse("2006-01-02T15-04", name[:min(len(name), 16)])
				if err != nil {
					t.Fatalf("chat file %s: %v", file, err)
				}
				h := s.Handle()
				_ = s.Stop()
				return h, m
			}
			if time.Now().After(deadline) {
				t.Fatalf("gemini never wrote %s to its chat file", marker)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// The same minute: conclusive only when the whole load ran in the
	// minute of the session's file (a loaded machine may need a retry).
	for attempt := 1; ; attempt++ {
		if time.Now().UTC().Second() > 5 {
			time.Sleep(time.Until(minute(time.Now()).Add(time.Minute)))
		}
		marker := fmt.Sprintf("E2E-A%d", attempt)
		h, fileMinute := session(marker)
		start := time.Now()
		_, err := e.provider().Restore(t.Context(), e.spec(), nil, h)
		if minute(start).Equal(fileMinute) && minute(time.Now()).Equal(fileMinute) {
			if !errors.Is(err, provider.ErrCannotRestore) || !strings.Contains(err.Error(), "No previous sessions found") {
				t.Fatalf("load in the session's minute: %v; want Gemini's \"No previous sessions found\" (if it restored, the upstream bug is fixed: update docs/DECISIONS.md and the e2e expectations)", err)
			}
			t.Logf("same minute: %v", err)
			break
		}
		if attempt == 3 {
			t.Fatalf("in 3 tries no load ran within its session's minute: the machine is too slow for this test")
		}
		t.Logf("attempt %d inconclusive (file minute %s, load %s-%s)", attempt, fileMinute.Format(time.TimeOnly),
			start.UTC().Format(time.TimeOnly), time.Now().UTC().Format(time.TimeOnly))
	}

	h, fileMinute := session("E2E-B")
	time.Sleep(time.Until(fileMinute.Add(time.Minute)))
	r, err := e.provider().Restore(t.Context(), e.spec(), nil, h)
	if err != nil {
		t.Fatalf("load in a later minute: %v", err)
	}
	rs := r.(*Session)
	t.Cleanup(func() { _ = rs.Stop() })
	if rs.RestoredBy() != "session/load" {
		t.Fatalf("restored by %q", rs.RestoredBy())
	}
	send(t, rs, "E2E-B second turn")
	reqs := f.Requests()
	_, msgs := reqs[len(reqs)-1].Messages()
	earlier := false
	for _, m := range msgs[:max(0, len(msgs)-1)] {
		earlier = earlier || m.Role == "user" && strings.Contains(m.Text, "E2E-B first turn")
	}
	if !earlier {
		t.Fatalf("after the load the model did not get the first turn as an earlier message: %+v", msgs)
	}
	t.Logf("a later minute: restored by session/load, the first turn in the model's context")
}
