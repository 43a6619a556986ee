package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/warren-dev/warren/config"
	"github.com/warren-dev/warren/faultfs"
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

// budgetHome is a harness with agent "spender" (budget: 500 tokens) whose
// turn makes three requests of 200 tokens with a tool call between the
// first two.
func budgetHome(t *testing.T) (*harness, string) {
	h := newHarness(t)
	h.prov.Register("spender", func(_ context.Context, t *inproc.Turn) (string, error) {
		for i := range 3 {
			if err := t.Request(provider.Usage{InputTokens: 150, OutputTokens: 50}); err != nil {
				return "", err
			}
			if i == 0 {
				if _, err := t.Call("list_children", map[string]any{}); err != nil {
					return "", err
				}
			}
		}
		return "spent", nil
	})
	limit := int64(500)
	id, err := h.c.CreateAgent(context.Background(), CreateSpec{Name: "spender", Provider: "inproc", Model: "spender",
		Budget: &schema.BudgetSetData{Tokens: &limit}})
	if err != nil {
		t.Fatal(err)
	}
	return h, id
}

// checkSpend is guarantee 11.9 on agent id: the spend the engine counts
// is the sum of the usage.step entries and the completed turns in its
// log, and it passed the budget by at most one request (one agent runs).
func checkSpend(t *testing.T, h *harness, id string) {
	t.Helper()
	var tokens int64
	steps := 0
	for _, e := range h.entries(id) {
		if e.Event == schema.UsageStep {
			var d schema.UsageStepData
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			tokens += int64(d.InputTokens + d.OutputTokens)
			steps++
		}
	}
	a, _ := h.c.agent(id)
	s := a.Spent()
	if s.Tokens != tokens || s.Steps != steps || s.Turns != h.count(id, schema.TurnComplete) {
		t.Fatalf("the counted spend %+v; the log has %d tokens in %d steps and %d turns", s, tokens, steps, h.count(id, schema.TurnComplete))
	}
	if s.Tokens > 500+200 {
		t.Fatalf("spent %d tokens against a budget of 500: more than one request over", s.Tokens)
	}
}

// TestBudgetCrashAtEveryOp: a turn that makes requests against a budget
// (its third request overshoots by one, as 11.9 allows) is crashed at
// every file operation; after each start the counted spend equals the
// logged steps, and once the run is re-run (its requests made again) it
// still does, the budget passed by at most one request.
func TestBudgetCrashAtEveryOp(t *testing.T) {
	h, id := budgetHome(t)
	before := h.fs.MutatingOps()
	h.send(id, "go")
	n := h.fs.MutatingOps() - before
	checkSpend(t, h, id)
	modes := []faultfs.RebootOptions{{Mode: faultfs.ProcessCrash}, {Mode: faultfs.PowerLoss, Tail: faultfs.TailGarbage}}
	for k := 1; k <= n+1; k++ {
		for mi, mode := range modes {
			t.Run(fmt.Sprintf("k=%d/mode=%d", k, mi), func(t *testing.T) {
				h, id := budgetHome(t)
				h.fs.CrashAt(k)
				h.send(id, "go")
				h.fs.Crash()
				h.c.Abandon()
				mode.Rand = rand.New(rand.NewPCG(uint64(k), uint64(mi)))
				h.fs.Reboot(mode)
				h.start()
				checkSpend(t, h, id)
				if len(h.c.Interrupted()) > 0 {
					if _, err := h.c.Resume(context.Background(), id, "", ""); err != nil {
						t.Fatalf("re-running: %v", err)
					}
					h.quiet()
				}
				checkSpend(t, h, id)
			})
		}
	}
}

// TestDefaultBudgetAndCancel: the config's budget is every new root's
// (a provider entry's wins), a child gets none by default; a run waiting
// on a spent budget ends with agent.cancel, nothing more charged.
func TestDefaultBudgetAndCancel(t *testing.T) {
	two := int64(2)
	h := newHarness(t, func(h *harness) {
		h.cfg.Budget = &schema.BudgetSetData{Turns: &two, By: schema.ByOperator}
	})
	root := h.create("root", "", "echo")
	kid := h.create("kid", root, "echo")
	if b, _, ok := h.c.BudgetOf(root); !ok || b.Turns == nil || *b.Turns != 2 {
		t.Fatalf("the root's budget: %+v", b)
	}
	if _, _, ok := h.c.BudgetOf(kid); ok {
		t.Fatal("a child got the roots' default budget")
	}
	h.send(root, "one")
	h.send(root, "two")
	res := h.send(root, "three")
	if res.Status != session.StatusSuspended || res.Wait == nil || res.Wait.Kind != schema.WaitBudget {
		t.Fatalf("the third turn of a two-turn budget: %+v", res)
	}
	if err := h.c.Cancel(context.Background(), root); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if ws := h.c.Waits(); len(ws) != 0 {
		t.Fatalf("waits after the cancel: %+v", ws)
	}
	if a, _ := h.c.agent(root); a.Spent().Turns != 2 {
		t.Fatalf("turns spent %d, want 2", a.Spent().Turns)
	}
}

// TestTerminatedSpendStaysInTheEnvelope: what a terminated child spent
// still counts in its ancestors' subtree spend (a team cannot escape its
// budget by ending its children), after a restart too.
func TestTerminatedSpendStaysInTheEnvelope(t *testing.T) {
	h := newHarness(t)
	h.prov.Register("spend400", func(_ context.Context, t *inproc.Turn) (string, error) {
		return "ok", t.Request(provider.Usage{InputTokens: 300, OutputTokens: 100})
	})
	limit := int64(1000)
	root, err := h.c.CreateAgent(context.Background(), CreateSpec{Name: "root", Provider: "inproc", Model: "echo", Budget: &schema.BudgetSetData{Tokens: &limit}})
	if err != nil {
		t.Fatal(err)
	}
	kid := h.create("kid", root, "spend400")
	h.send(kid, "go")
	if err := h.c.Terminate(context.Background(), kid); err != nil {
		t.Fatal(err)
	}
	if got := h.c.SubtreeSpent(root).Tokens; got != 400 {
		t.Fatalf("the root's subtree spend after the child's termination: %d, want 400", got)
	}
	h.restart()
	if got := h.c.SubtreeSpent(root).Tokens; got != 400 {
		t.Fatalf("after a restart: %d, want 400", got)
	}
	if _, left, _ := h.c.BudgetOf(root); left["tokens"] != int64(600) {
		t.Fatalf("the root's remaining: %v, want 600", left)
	}
}

// TestNoUsageTurnsOnly: an entry whose agents report no token usage
// ("usage": false) can have a turns budget only.
func TestNoUsageTurnsOnly(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		h.cfg.Providers = map[string]config.ProviderConfig{"inproc": {Settings: map[string]any{"usage": false}}}
	})
	n := int64(10)
	_, err := h.c.CreateAgent(context.Background(), CreateSpec{Name: "a", Provider: "inproc", Model: "echo", Budget: &schema.BudgetSetData{Tokens: &n}})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "turns budget only") {
		t.Fatalf("a token budget on an entry without usage: %v", err)
	}
	if _, err := h.c.CreateAgent(context.Background(), CreateSpec{Name: "b", Provider: "inproc", Model: "echo", Budget: &schema.BudgetSetData{Turns: &n}}); err != nil {
		t.Fatalf("a turns budget: %v", err)
	}
}

// TestGrantInATurn: spawn_agent's budget from a running turn: grants held
// until the children exist, so two in one turn cannot both take the same
// remaining; the child's envelope is logged by its parent's id.
func TestGrantInATurn(t *testing.T) {
	h := newHarness(t)
	var results []map[string]any
	h.prov.Register("granter", func(_ context.Context, t *inproc.Turn) (string, error) {
		if t.Instructions == "work" {
			return "worked", nil // w1 inherits this model; it only answers
		}
		for _, name := range []string{"w1", "w2"} {
			r, err := t.Call("spawn_agent", map[string]any{"name": name, "instructions": "work", "budget": map[string]any{"tokens": 600}})
			if err != nil {
				return "", err
			}
			results = append(results, r)
		}
		return "granted", nil
	})
	limit := int64(1000)
	lead, err := h.c.CreateAgent(context.Background(), CreateSpec{Name: "lead", Provider: "inproc", Model: "granter", Budget: &schema.BudgetSetData{Tokens: &limit}})
	if err != nil {
		t.Fatal(err)
	}
	if res := h.send(lead, "grant"); res.Err != nil {
		t.Fatal(res.Err)
	}
	if results[0]["error"] != nil || !strings.Contains(fmt.Sprint(results[1]["error"]), "more than the 400 left") {
		t.Fatalf("the two grants: %v", results)
	}
	h.quiet()
	kids := h.c.tree.Children(lead)
	if len(kids) != 1 {
		t.Fatalf("children %v, want w1 only", kids)
	}
	if b, _, ok := h.c.BudgetOf(kids[0]); !ok || b.By != lead || *b.Tokens != 600 {
		t.Fatalf("w1's budget: %+v", b)
	}
	if _, left, _ := h.c.BudgetOf(lead); left["tokens"] != int64(400) {
		t.Fatalf("the lead's remaining: %v", left)
	}
}
