package llm_test

// Every byte that comes from a provider is bounded (issue 31 D3): the text
// of a step by the message limit, a tool call's arguments by the same
// limit (refused, answered with a short error, not kept), the arguments
// of an unknown tool kept only when small, and the turn's own messages by
// the per-turn transcript budget.

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/anthropic"
	"github.com/warren-dev/warren/provider/llm"
	"github.com/warren-dev/warren/provider/llmfake"
	"github.com/warren-dev/warren/provider/openai"
)

// fakeProvider is a provider of api's type on a fake server, with the
// default limits unless st changes them.
func fakeProvider(t *testing.T, api llmfake.API, st func(*llm.Settings)) (*llmfake.Server, provider.Session) {
	t.Helper()
	f := llmfake.New(api)
	t.Cleanup(f.Close)
	opts := llm.Options{Name: "hos", Settings: func() llm.Settings {
		s := llm.Settings{BaseURL: f.BaseURL(), Timeout: 10 * time.Second}
		if st != nil {
			st(&s)
		}
		return s
	}}
	var p *llm.Provider
	if api == llmfake.Anthropic {
		p = anthropic.New(opts)
	} else {
		p = openai.New(opts)
	}
	s, err := p.Create(context.Background(), provider.Spec{AgentID: "a1", Model: "m", System: "sys"})
	if err != nil {
		t.Fatal(err)
	}
	return f, s
}

// calls records the tool calls the daemon would run (and log).
type calls struct {
	mu  sync.Mutex
	got []string
}

func (c *calls) CallTool(_ context.Context, tool string, _ map[string]any) (map[string]any, error) {
	c.mu.Lock()
	c.got = append(c.got, tool)
	c.mu.Unlock()
	return map[string]any{"ok": true}, nil
}

// A model's text over the message limit (limits.message_bytes, 1 MiB by
// default) fails the turn, permanently, naming the setting; no more than
// the limit is streamed or kept.
func TestResponseTextOverTheMessageLimitFails(t *testing.T) {
	for _, api := range []llmfake.API{llmfake.OpenAI, llmfake.Anthropic} {
		t.Run(string(api), func(t *testing.T) {
			f, s := fakeProvider(t, api, nil)
			f.Push(llmfake.Reply{Text: strings.Repeat("t", 3<<20), Chunk: 64 << 10})
			streamed := 0
			resp, err := s.Send(context.Background(), "hi", provider.TurnIO{OnChunk: func(c string) { streamed += len(c) }})
			if err == nil {
				t.Fatalf("a response of %d bytes was accepted", len(resp))
			}
			if tr, _ := provider.IsTransient(err); tr || !strings.Contains(err.Error(), "limits.message_bytes") {
				t.Fatalf("err %v", err)
			}
			if streamed > 1<<20 {
				t.Fatalf("%d bytes streamed, over the limit", streamed)
			}
			// Within the limit, a long answer is fine.
			f.Push(llmfake.Reply{Text: strings.Repeat("u", 900<<10), Chunk: 64 << 10})
			if resp, err := s.Send(context.Background(), "again", provider.TurnIO{}); err != nil || len(resp) != 900<<10 {
				t.Fatalf("%d bytes, %v", len(resp), err)
			}
		})
	}
}

// A hostile server answers each step with a huge call of an unknown tool,
// then of a known one: none is run, none is echoed, none is kept whole, so
// the requests do not grow with the arguments.
func TestOversizedToolCallsAreRefusedAndNotKept(t *testing.T) {
	for _, api := range []llmfake.API{llmfake.OpenAI, llmfake.Anthropic} {
		t.Run(string(api), func(t *testing.T) {
			f, s := fakeProvider(t, api, nil)
			huge := `{"x":"` + strings.Repeat("h", 2<<20) + `"}`
			mid := `{"x":"` + strings.Repeat("m", 100<<10) + `"}`
			f.Push(
				llmfake.Reply{Calls: []llmfake.Call{{Name: "no_such_tool", Args: huge}}, WholeArgs: true},
				llmfake.Reply{Calls: []llmfake.Call{{Name: "no_such_tool", Args: mid}}, WholeArgs: true},
				llmfake.Reply{Calls: []llmfake.Call{{Name: "send_message", Args: huge}}, WholeArgs: true},
				llmfake.Reply{Calls: []llmfake.Call{{Name: "no_such_tool", Args: `{"small":1}`}}, WholeArgs: true},
				llmfake.Reply{Text: "done"})
			tc := &calls{}
			resp, err := s.Send(context.Background(), "hi", provider.TurnIO{Tools: tc})
			if err != nil || resp != "done" {
				t.Fatalf("%q, %v", resp, err)
			}
			if len(tc.got) != 0 {
				t.Fatalf("calls ran: %v", tc.got)
			}
			reqs := f.Requests()
			if len(reqs) != 5 {
				t.Fatalf("%d requests", len(reqs))
			}
			for i, r := range reqs {
				if len(r.Body) > 64<<10 {
					t.Fatalf("request %d is %d bytes: the arguments were kept", i+1, len(r.Body))
				}
			}
			_, msgs := reqs[4].Messages()
			var results []string
			for _, m := range msgs {
				if m.Role == "tool" {
					results = append(results, m.Text)
				}
			}
			if len(results) != 4 {
				t.Fatalf("tool results %q", results)
			}
			for i, want := range []string{"over the limit", "bytes of arguments are left out", "over the limit", "unknown tool"} {
				if !strings.Contains(results[i], want) || len(results[i]) > 2000 {
					t.Fatalf("result %d: %q", i+1, results[i])
				}
			}
			if !strings.Contains(results[0], "limits.message_bytes") {
				t.Fatalf("result 1 does not name the limit: %q", results[0])
			}
			// The small call of an unknown tool is kept as the model sent it.
			if !strings.Contains(string(reqs[4].Body), "small") {
				t.Fatal("the small arguments of an unknown tool were not kept")
			}
		})
	}
}

// The turn's own messages, sent again with every step, are bounded by the
// per-turn transcript budget: past it the turn fails before the request
// goes out, naming limits.turn_transcript_bytes.
func TestTurnTranscriptBudget(t *testing.T) {
	for _, api := range []llmfake.API{llmfake.OpenAI, llmfake.Anthropic} {
		t.Run(string(api), func(t *testing.T) {
			f, s := fakeProvider(t, api, func(st *llm.Settings) { st.TurnBytes = 1 << 20 })
			args := `{"to":"USER","message":"` + strings.Repeat("a", 300<<10) + `"}`
			f.Respond(func(llmfake.Request) llmfake.Reply {
				return llmfake.Reply{Calls: []llmfake.Call{{Name: "send_message", Args: args}}, WholeArgs: true}
			})
			tc := &calls{}
			_, err := s.Send(context.Background(), "hi", provider.TurnIO{Tools: tc})
			if !errors.Is(err, llm.ErrTurnTooLarge) || !strings.Contains(err.Error(), "limits.turn_transcript_bytes") {
				t.Fatalf("err %v", err)
			}
			if tr, _ := provider.IsTransient(err); tr {
				t.Fatalf("transient: %v", err)
			}
			// Each step adds a little over 300 KiB: the fifth request
			// would pass 1 MiB and is never sent.
			reqs := f.Requests()
			if len(reqs) != 4 || len(tc.got) != 4 {
				t.Fatalf("%d requests, %d calls", len(reqs), len(tc.got))
			}
			for i, r := range reqs {
				if len(r.Body) > 1<<20+64<<10 {
					t.Fatalf("request %d is %d bytes", i+1, len(r.Body))
				}
			}
			// The session is fine for the next turn.
			f.Respond(func(llmfake.Request) llmfake.Reply { return llmfake.Reply{Text: "ok"} })
			if resp, err := s.Send(context.Background(), "next", provider.TurnIO{}); err != nil || resp != "ok" {
				t.Fatalf("%q %v", resp, err)
			}
		})
	}
}
