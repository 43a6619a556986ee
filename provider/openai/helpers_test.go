package openai_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/llm"
	"github.com/warren-dev/warren/provider/llmfake"
	"github.com/warren-dev/warren/provider/openai"
)

const testKey = "sk-test-SECRET-0123456789"

type env struct {
	t    *testing.T
	fake *llmfake.Server
	p    *llm.Provider
	mu   sync.Mutex
	st   llm.Settings
}

func newEnv(t *testing.T, mod ...func(*llm.Options)) *env {
	t.Helper()
	e := &env{t: t, fake: llmfake.New(llmfake.OpenAI)}
	t.Cleanup(e.fake.Close)
	e.st = llm.Settings{BaseURL: e.fake.BaseURL(), APIKeyEnv: "TEST_OPENAI_KEY", Model: "gpt-test", Timeout: 5 * time.Second}
	opts := llm.Options{Name: "openai", Settings: e.settings,
		Getenv: func(k string) string {
			if k == "TEST_OPENAI_KEY" {
				return testKey
			}
			return ""
		}}
	for _, m := range mod {
		m(&opts)
	}
	e.p = openai.New(opts)
	return e
}

func (e *env) settings() llm.Settings {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.st
}

func (e *env) set(f func(*llm.Settings)) {
	e.mu.Lock()
	f(&e.st)
	e.mu.Unlock()
}

func (e *env) session(hist ...provider.Turn) provider.Session {
	e.t.Helper()
	s, err := e.p.Create(context.Background(), provider.Spec{AgentID: "a1", Model: "gpt-test", System: "You are a test agent.", History: hist})
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// tools is a BatchToolCaller recording the batches it ran.
type tools struct {
	mu      sync.Mutex
	batches [][]provider.ToolRequest
	answer  func(provider.ToolRequest) (map[string]any, error)
}

func (t *tools) CallTool(ctx context.Context, tool string, args map[string]any) (map[string]any, error) {
	r := t.CallTools(ctx, []provider.ToolRequest{{Tool: tool, Args: args}})
	return r[0].Result, r[0].Err
}

func (t *tools) CallTools(_ context.Context, calls []provider.ToolRequest) []provider.ToolResponse {
	t.mu.Lock()
	t.batches = append(t.batches, calls)
	t.mu.Unlock()
	out := make([]provider.ToolResponse, len(calls))
	for i, c := range calls {
		if t.answer != nil {
			out[i].Result, out[i].Err = t.answer(c)
		} else {
			out[i].Result = map[string]any{"ok": true, "tool": c.Tool}
		}
	}
	return out
}

type turnOut struct {
	resp   string
	err    error
	chunks []string
	usage  []provider.Usage
}

func send(s provider.Session, prompt string, tc provider.ToolCaller) turnOut {
	var o turnOut
	o.resp, o.err = s.Send(context.Background(), prompt, provider.TurnIO{Tools: tc,
		OnChunk: func(c string) { o.chunks = append(o.chunks, c) },
		OnUsage: func(u provider.Usage) { o.usage = append(o.usage, u) }})
	return o
}

func body(t *testing.T, r llmfake.Request) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("request body is not JSON: %v\n%s", err, r.Body)
	}
	return m
}
