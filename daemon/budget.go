package daemon

import (
	"context"

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

// budgetParams reads a budget (schema.ParseBudget): the object param
// name, or with name "" the tokens, usd and turns params of p itself; nil
// when none is given.
func budgetParams(p protocol.Params, name string) (*engine.BudgetChange, error) {
	m := map[string]any{}
	where := "param "
	if name != "" {
		obj, err := p.OptMap(name)
		if err != nil || obj == nil {
			return nil, err
		}
		m, where = obj, "param "+name+": "
	} else {
		for _, k := range []string{"tokens", "usd", "turns"} {
			if v, ok := p[k]; ok && v != nil {
				m[k] = v
			}
		}
		if len(m) == 0 {
			return nil, nil
		}
	}
	b, err := schema.ParseBudget(m)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInvalid, "%s%v", where, err)
	}
	return &engine.BudgetChange{Tokens: b.Tokens, USD: b.USD, Turns: b.Turns}, nil
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
