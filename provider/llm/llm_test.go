package llm_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/llm"
	"github.com/warren-dev/warren/provider/llmfake"
	"github.com/warren-dev/warren/provider/openai"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			out.Set(kv[i], kv[i+1])
		}
		return out
	}
	cases := []struct {
		h    http.Header
		want time.Duration
	}{
		{h(), 0},
		{h("Retry-After", "7"), 7 * time.Second},
		{h("Retry-After", "0.5"), 500 * time.Millisecond},
		{h("Retry-After", now.Add(90*time.Second).Format(http.TimeFormat)), 90 * time.Second},
		{h("Retry-After", now.Add(-time.Minute).Format(http.TimeFormat)), 0},
		{h("Retry-After", "soon"), 0},
		{h("Retry-After", "-3"), 0},
		{h("retry-after-ms", "250", "Retry-After", "9"), 250 * time.Millisecond},
		{h("retry-after-ms", "x", "Retry-After", "9"), 9 * time.Second},
		{h("Retry-After", "99999999"), llm.MaxRetryAfter},
	}
	for _, c := range cases {
		if got := llm.RetryAfter(c.h, now); got != c.want {
			t.Errorf("RetryAfter(%v) = %v, want %v", c.h, got, c.want)
		}
	}
}

func TestContextBudgetCutsOldTurnsInLargeSteps(t *testing.T) {
	f := llmfake.New(llmfake.OpenAI)
	defer f.Close()
	f.Respond(func(r llmfake.Request) llmfake.Reply { return llmfake.Reply{Text: strings.Repeat("r", 400)} })
	// The head (17 tools) is about 9 KB; each turn adds about 1 KB.
	budget := 0
	p := openai.New(llm.Options{Name: "local", Settings: func() llm.Settings {
		return llm.Settings{BaseURL: f.BaseURL(), ContextBudget: budget}
	}})
	s, _ := p.Create(context.Background(), provider.Spec{Model: "m", System: "sys"})
	budget = 0 // default first: measure the head
	if _, err := s.Send(context.Background(), "warm-up", provider.TurnIO{}); err != nil {
		t.Fatal(err)
	}
	headTokens := len(f.Requests()[0].Body) / llm.BytesPerToken
	budget = headTokens + 2500 // room for about 10 turns
	for i := 0; i < 40; i++ {
		if _, err := s.Send(context.Background(), strings.Repeat("u", 500), provider.TurnIO{}); err != nil {
			t.Fatal(err)
		}
	}
	reqs := f.Requests()
	cuts := 0
	for i := 1; i < len(reqs); i++ {
		if len(reqs[i].Body) > budget*llm.BytesPerToken+2000 {
			t.Fatalf("request %d is %d bytes, over the budget of %d tokens", i, len(reqs[i].Body), budget)
		}
		prev := bytes.TrimSuffix(reqs[i-1].Body, []byte("]}"))
		if !bytes.HasPrefix(reqs[i].Body, prev) {
			cuts++
			_, msgs := reqs[i].Messages()
			if !strings.Contains(msgs[0].Text, "left out here to fit the context budget") ||
				!strings.Contains(msgs[0].Text, "providers.local.context_budget") {
				t.Fatalf("a cut request does not begin with the note: %+v", msgs[0])
			}
		}
	}
	// Cutting in large steps: a few cuts over 40 turns, not one per turn.
	if cuts < 2 || cuts > 10 {
		t.Fatalf("%d cuts over 40 turns", cuts)
	}
}
