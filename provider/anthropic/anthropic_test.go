package anthropic_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/anthropic"
	"github.com/warren-dev/warren/provider/llm"
	"github.com/warren-dev/warren/provider/llmfake"
)

const testKey = "sk-ant-test-SECRET-42"

func newProvider(t *testing.T, timeout time.Duration) (*llmfake.Server, *llm.Provider) {
	t.Helper()
	f := llmfake.New(llmfake.Anthropic)
	t.Cleanup(f.Close)
	p := anthropic.New(llm.Options{Name: "anthropic",
		Settings: func() llm.Settings {
			return llm.Settings{BaseURL: f.BaseURL(), APIKeyEnv: "K", Timeout: timeout, MaxTokens: 1024}
		},
		Getenv: func(string) string { return testKey }})
	return f, p
}

type batcher struct {
	mu      sync.Mutex
	batches [][]provider.ToolRequest
}

func (b *batcher) CallTool(ctx context.Context, tool string, args map[string]any) (map[string]any, error) {
	r := b.CallTools(ctx, []provider.ToolRequest{{Tool: tool, Args: args}})
	return r[0].Result, r[0].Err
}

func (b *batcher) CallTools(_ context.Context, calls []provider.ToolRequest) []provider.ToolResponse {
	b.mu.Lock()
	b.batches = append(b.batches, calls)
	b.mu.Unlock()
	out := make([]provider.ToolResponse, len(calls))
	for i, c := range calls {
		if c.Tool == "inspect_agent" {
			out[i].Result = map[string]any{"error": "no child named x"}
			continue
		}
		out[i].Result = map[string]any{"ok": c.Tool}
	}
	return out
}

func TestAnthropicRequestShapeToolLoopAndCacheBreakpoints(t *testing.T) {
	f, p := newProvider(t, 5*time.Second)
	f.Push(
		llmfake.Reply{Text: "Sending.", Calls: []llmfake.Call{
			{ID: "toolu_01", Name: "send_message", Args: `{"recipient":"bob","text":"hi"}`},
			{ID: "toolu_02", Name: "inspect_agent", Args: `{"name":"x"}`}}},
		llmfake.Reply{Text: "Done.", InputTokens: 500, CachedTokens: 400, OutputTokens: 3},
	)
	s, err := p.Create(context.Background(), provider.Spec{AgentID: "a", Model: "claude-test", System: "SYS"})
	if err != nil {
		t.Fatal(err)
	}
	var chunks []string
	var usage provider.Usage
	b := &batcher{}
	resp, err := s.Send(context.Background(), "go", provider.TurnIO{Tools: b,
		OnChunk: func(c string) { chunks = append(chunks, c) },
		OnUsage: func(u provider.Usage) { usage = usage.Add(u) }})
	if err != nil || resp != "Done." {
		t.Fatalf("resp %q err %v", resp, err)
	}
	if strings.Join(chunks, "") != "Sending.Done." {
		t.Fatalf("chunks %q", chunks)
	}
	if usage.InputTokens < 500 || usage.CachedInputTokens != 400 || usage.OutputTokens < 3 {
		t.Fatalf("usage %+v", usage)
	}
	if len(b.batches) != 1 || len(b.batches[0]) != 2 || b.batches[0][0].Args["recipient"] != "bob" {
		t.Fatalf("batches %+v", b.batches)
	}
	reqs := f.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[1]
	if r.Path != "/v1/messages" || r.Header.Get("x-api-key") != testKey || r.Header.Get("anthropic-version") != "2023-06-01" ||
		r.Header.Get("Authorization") != "" {
		t.Fatalf("path %s headers %v", r.Path, r.Header)
	}
	var body struct {
		Model     string `json:"model"`
		MaxTokens int    `json:"max_tokens"`
		Stream    bool   `json:"stream"`
		System    []struct {
			Type, Text   string
			CacheControl map[string]any `json:"cache_control"`
		} `json:"system"`
		Tools []struct {
			Name         string         `json:"name"`
			InputSchema  map[string]any `json:"input_schema"`
			CacheControl map[string]any `json:"cache_control"`
		} `json:"tools"`
		Messages []struct {
			Role    string           `json:"role"`
			Content []map[string]any `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatal(err)
	}
	if body.Model != "claude-test" || body.MaxTokens != 1024 || !body.Stream {
		t.Fatalf("head %+v", body)
	}
	if len(body.System) != 1 || body.System[0].Text != "SYS" || body.System[0].CacheControl["type"] != "ephemeral" {
		t.Fatalf("system %+v", body.System)
	}
	for i, tl := range body.Tools {
		last := i == len(body.Tools)-1
		if (tl.CacheControl != nil) != last || tl.InputSchema["type"] != "object" {
			t.Fatalf("tool %d %s: cache_control %v schema %v", i, tl.Name, tl.CacheControl, tl.InputSchema["type"])
		}
	}
	// user, assistant [text, tool_use, tool_use], user [tool_result, tool_result (is_error)]
	m := body.Messages
	if len(m) != 3 || m[0].Role != "user" || m[1].Role != "assistant" || m[2].Role != "user" {
		t.Fatalf("messages %+v", m)
	}
	if c := m[1].Content; len(c) != 3 || c[0]["type"] != "text" || c[1]["type"] != "tool_use" || c[1]["id"] != "toolu_01" ||
		c[1]["input"].(map[string]any)["recipient"] != "bob" || c[2]["id"] != "toolu_02" {
		t.Fatalf("assistant content %+v", c)
	}
	res := m[2].Content
	if len(res) != 2 || res[0]["tool_use_id"] != "toolu_01" || res[0]["content"] != `{"ok":"send_message"}` || res[0]["is_error"] != nil ||
		res[1]["tool_use_id"] != "toolu_02" || res[1]["content"] != "no child named x" || res[1]["is_error"] != true {
		t.Fatalf("tool results %+v", res)
	}
	// Only the last block of the last message carries a breakpoint.
	if res[1]["cache_control"] == nil || res[0]["cache_control"] != nil || m[1].Content[2]["cache_control"] != nil {
		t.Fatalf("breakpoints: %+v / %+v", res, m[1].Content)
	}
	// The first request's last message (the user prompt) was marked then;
	// the bytes before it are the same in the second request.
	first := reqs[0].Body
	cut := bytes.Index(first, []byte(`{"role":"user"`))
	if cut < 0 || !bytes.HasPrefix(r.Body, first[:cut]) {
		t.Fatalf("the second request does not share the first's head")
	}
}

func TestAnthropicErrors(t *testing.T) {
	f := llmfake.New(llmfake.Anthropic)
	defer f.Close()
	cases := []struct {
		name      string
		rep       llmfake.Reply
		transient bool
		contains  string
	}{
		{"overloaded event after 200", llmfake.Reply{Text: "abcdefgh", ErrorAfter: 3, ErrorType: "overloaded_error", ErrorMessage: "Overloaded"}, true, "Overloaded"},
		{"rate limit event after 200", llmfake.Reply{Text: "abc", ErrorAfter: 2, ErrorType: "rate_limit_error", ErrorMessage: "slow down"}, true, "slow down"},
		{"invalid request event after 200", llmfake.Reply{Text: "abc", ErrorAfter: 2, ErrorType: "invalid_request_error", ErrorMessage: "bad"}, false, "bad"},
		{"529", f.Status(529, "overloaded_error", "Overloaded"), true, "HTTP 529"},
		{"429", f.RateLimited("3"), true, "HTTP 429"},
		{"401", f.Status(401, "authentication_error", "invalid x-api-key"), false, "invalid x-api-key"},
		{"prompt too long", f.Status(400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"), false, "providers.anthropic.context_budget"},
		{"cut before message_stop", llmfake.Reply{Text: "abcdefghijkl", CutAfter: 4}, true, "ended before its end"},
		{"stalled", llmfake.Reply{Text: "abcdefghijkl", Stall: true, StallAfter: 3}, true, "idle timeout"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			timeout := 10 * time.Second
			if c.name == "stalled" {
				timeout = 300 * time.Millisecond
			}
			fk, p := newProvider(t, timeout)
			fk.Push(c.rep)
			s, _ := p.Create(context.Background(), provider.Spec{Model: "m"})
			_, err := s.Send(context.Background(), "go", provider.TurnIO{Tools: &batcher{}})
			var pe *provider.Error
			if !errors.As(err, &pe) || pe.Transient != c.transient || !strings.Contains(err.Error(), c.contains) {
				t.Fatalf("err = %v; want transient=%v containing %q", err, c.transient, c.contains)
			}
			if c.name == "429" && pe.RetryAfter != 3*time.Second {
				t.Fatalf("retry after %v", pe.RetryAfter)
			}
			if fk.Count() != 1 {
				t.Fatalf("%d requests", fk.Count())
			}
		})
	}
}

func TestAnthropicTextWithEscapesStreamsIntact(t *testing.T) {
	f, p := newProvider(t, 5*time.Second)
	text := "a\nb \"c\" é 日本 \\ "
	f.Push(llmfake.Reply{Text: text, Chunk: 2})
	s, _ := p.Create(context.Background(), provider.Spec{Model: "m"})
	var chunks []string
	resp, err := s.Send(context.Background(), "go", provider.TurnIO{OnChunk: func(c string) { chunks = append(chunks, c) }})
	if err != nil || resp != text || strings.Join(chunks, "") != text {
		t.Fatalf("resp %q chunks %q err %v", resp, chunks, err)
	}
}
