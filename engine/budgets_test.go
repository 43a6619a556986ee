package engine

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/warren-dev/warren/config"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/session"
)

// TestDollarBudget: a dollar budget against the config's price table,
// cache tokens priced apart (the figure computed by hand): each turn makes
// one request of 1,000 input tokens (600 read from the cache, 100 written
// to it) and 50 output at $3 / $15 / $0.30 / $3.75 per million:
// 300 x 3 + 600 x 0.3 + 100 x 3.75 + 50 x 15 = $0.002205. With $0.004 the
// first two turns run (the second starts with $0.0018 left) and the third waits; a dollar budget
// on a model without a price is refused.
func TestDollarBudget(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		h.cfg.Prices = map[string]config.Price{"inproc/cached": {InputPerMTok: 3, OutputPerMTok: 15, CacheReadPerMTok: 0.3, CacheWritePerMTok: 3.75}}
	})
	h.prov.Register("cached", func(_ context.Context, t *inproc.Turn) (string, error) {
		if err := t.Request(provider.Usage{InputTokens: 1000, CachedInputTokens: 600, CacheWriteInputTokens: 100, OutputTokens: 50}); err != nil {
			return "", err
		}
		return "done", nil
	})
	usd := 0.004
	id, err := h.c.CreateAgent(context.Background(), CreateSpec{Name: "lead", Provider: "inproc", Model: "cached", Budget: &schema.BudgetSetData{USD: &usd}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if res := h.send(id, "go"); res.Err != nil || res.Response != "done" {
			t.Fatalf("turn %d: %+v", i+1, res)
		}
	}
	a, _ := h.c.agent(id)
	if got := a.Spent().USD; math.Abs(got-2*0.002205) > 1e-12 {
		t.Fatalf("spent $%v after two turns, want $%v", got, 2*0.002205)
	}
	res := h.send(id, "go")
	if res.Status != session.StatusSuspended || res.Wait == nil || res.Wait.Kind != schema.WaitBudget || !strings.Contains(res.Wait.Prompt, "dollar budget of lead is spent") {
		t.Fatalf("the third turn: %+v (wait %+v)", res, res.Wait)
	}
	if _, err := h.c.CreateAgent(context.Background(), CreateSpec{Name: "free", Provider: "inproc", Model: "echo", Budget: &schema.BudgetSetData{USD: &usd}}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "needs a price for inproc/echo") {
		t.Fatalf("a dollar budget without a price: %v", err)
	}
}

// TestBudgetWaitResumesOnRaise: the run waiting on a spent budget goes on
// when agent.budget adds to it, re-run from its start: the request it
// had made is made (and charged) again, its tool call answered from the
// log.
func TestBudgetWaitResumesOnRaise(t *testing.T) {
	h := newHarness(t)
	h.prov.Register("tworeq", func(_ context.Context, t *inproc.Turn) (string, error) {
		if err := t.Request(provider.Usage{InputTokens: 400, OutputTokens: 100}); err != nil {
			return "", err
		}
		if _, err := t.Call("set_agent_metadata", map[string]any{"agent_name": "nobody", "key": "k", "value": "v"}); err != nil {
			return "", err
		}
		if err := t.Request(provider.Usage{InputTokens: 400, OutputTokens: 100}); err != nil {
			return "", err
		}
		return "finished", nil
	})
	tokens := int64(500)
	id, err := h.c.CreateAgent(context.Background(), CreateSpec{Name: "lead", Provider: "inproc", Model: "tworeq", Budget: &schema.BudgetSetData{Tokens: &tokens}})
	if err != nil {
		t.Fatal(err)
	}
	res := h.send(id, "go")
	if res.Status != session.StatusSuspended || res.Wait == nil || res.Wait.Kind != schema.WaitBudget {
		t.Fatalf("the turn past the budget: %+v", res)
	}
	more := int64(1000)
	if _, err := h.c.SetBudget(context.Background(), id, BudgetChange{Tokens: &more, Add: true}); err != nil {
		t.Fatal(err)
	}
	h.until("the re-run finished", func() bool { return h.count(id, schema.TurnComplete) == 1 })
	if n := h.count(id, schema.UsageStep); n != 3 {
		t.Fatalf("usage.step x%d, want 3 (one before the wait, two in the re-run)", n)
	}
	if n := h.count(id, schema.ToolCall); n != 1 {
		t.Fatalf("tool.call x%d, want 1: the re-run answers it from the log", n)
	}
	if a, _ := h.c.agent(id); a.Spent().Tokens != 1500 {
		t.Fatalf("spent %d tokens, want 1500", a.Spent().Tokens)
	}
}
