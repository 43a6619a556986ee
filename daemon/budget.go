package daemon

import (
	"context"
	"encoding/json"
	"math"

	"github.com/warren-dev/warren/engine"
	"github.com/warren-dev/warren/protocol"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/server"
)

// agentBudget is agent.budget (SPEC 13): agent_id, tokens?, usd?, turns?,
// add?; it answers with the budget in force.
func (h *handler) agentBudget(ctx context.Context, p protocol.Params, _ server.Stream) (any, error) {
	id, err := h.ref(p, "agent_id")
	if err != nil {
		return nil, err
	}
	ch, err := budgetParams(p, "")
	if err != nil {
		return nil, err
	}
	if ch == nil {
		return nil, protocol.Errorf(protocol.CodeInvalid, "give tokens, usd or turns (with add: true to raise the budget by them)")
	}
	if ch.Add, err = p.OptBool("add", false); err != nil {
		return nil, err
	}
	b, err := h.c.SetBudget(ctx, id, *ch)
	if err != nil {
		return nil, err
	}
	return map[string]any{"agent_id": id, "budget": budgetMap(&b)}, nil
}

// budgetParams reads tokens, usd and turns: of the object param name, or
// of p itself with name "" (nil when none is given).
func budgetParams(p protocol.Params, name string) (*engine.BudgetChange, error) {
	src := map[string]any(p)
	prefix := ""
	if name != "" {
		m, err := p.OptMap(name)
		if err != nil || m == nil {
			return nil, err
		}
		src, prefix = m, name+"."
		for k := range m {
			if k != "tokens" && k != "usd" && k != "turns" {
				return nil, protocol.Errorf(protocol.CodeInvalid, "param %s%s: unknown; a budget has tokens, usd and turns", prefix, k)
			}
		}
	}
	var ch engine.BudgetChange
	for _, k := range []string{"tokens", "usd", "turns"} {
		v, ok := src[k]
		if !ok || v == nil {
			continue
		}
		f, isNum := number(v)
		if !isNum || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) || f > 1e15 {
			return nil, protocol.Errorf(protocol.CodeInvalid, "param %s%s: must be a number of 0 or more", prefix, k)
		}
		if k == "usd" {
			ch.USD = &f
			continue
		}
		if f != math.Trunc(f) {
			return nil, protocol.Errorf(protocol.CodeInvalid, "param %s%s: must be a whole number", prefix, k)
		}
		n := int64(f)
		if k == "tokens" {
			ch.Tokens = &n
		} else {
			ch.Turns = &n
		}
	}
	if ch.Tokens == nil && ch.USD == nil && ch.Turns == nil {
		return nil, nil
	}
	return &ch, nil
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case uint64:
		return float64(n), true
	case float64:
		return n, true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

// budgetMap is a budget as the replies show it (null: unlimited).
func budgetMap(b *schema.BudgetSetData) map[string]any {
	m := map[string]any{"tokens": nil, "usd": nil, "turns": nil, "by": b.By}
	if b.Tokens != nil {
		m["tokens"] = *b.Tokens
	}
	if b.USD != nil {
		m["usd"] = *b.USD
	}
	if b.Turns != nil {
		m["turns"] = *b.Turns
	}
	return m
}
