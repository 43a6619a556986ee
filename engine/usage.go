package engine

import (
	"github.com/warren-dev/warren/config"
	fold "github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/schema"
)

// Accounting (SPEC 13): every model request's usage is logged as
// usage.step as soon as the provider has read its response (its OnUsage),
// priced when config.json's "prices" has the model; the projection sums
// an agent's steps and completed turns (projection.Spent) and Spend sums
// a subtree's. Recovery recomputes all of it from the logs: a request
// re-made by a re-run is logged (it was made), a tool call answered from
// the log is not a request.

// usageLogger returns the OnUsage of one attempt of turn t: each call is
// the next model request of the turn.
func (c *Core) usageLogger(a *agent, t turnPlan, sum *provider.Usage) func(provider.Usage) {
	step := 0
	return func(u provider.Usage) {
		*sum = sum.Add(u)
		step++
		d := schema.UsageStepData{RunID: t.RunID, Turn: t.Turn, Step: step, InputTokens: u.InputTokens,
			OutputTokens: u.OutputTokens, CacheReadTokens: u.CachedInputTokens, CacheWriteTokens: u.CacheWriteInputTokens}
		if p, ok := c.config().PriceOf(t.Provider, t.Model); ok {
			usd := priceUSD(p, u)
			d.USD = &usd
		}
		if _, err := a.Append(schema.UsageStep, d); err != nil {
			c.log.Warn("logging usage.step: this request is missing from the agent's spend", "agent", a.ID(), "run", t.RunID, "err", err)
		}
	}
}

// priceUSD is what usage u costs at price p: input tokens are priced
// apart from the cache's reads and writes they include.
func priceUSD(p config.Price, u provider.Usage) float64 {
	plain := max(0, u.InputTokens-u.CachedInputTokens-u.CacheWriteInputTokens)
	return (float64(plain)*p.InputPerMTok + float64(u.CachedInputTokens)*p.CacheReadPerMTok +
		float64(u.CacheWriteInputTokens)*p.CacheWritePerMTok + float64(u.OutputTokens)*p.OutputPerMTok) / 1e6
}

// SubtreeSpent is what agent id and every loaded agent below it spent.
func (c *Core) SubtreeSpent(id string) fold.Spent {
	var sum fold.Spent
	for _, d := range c.tree.Subtree(id) {
		if a, ok := c.agent(d); ok {
			sum = sum.Add(a.Spent())
		}
	}
	return sum
}

// SubtreeSpends is every loaded agent's subtree spend, summed in one pass
// over the tree (agent.list).
func (c *Core) SubtreeSpends() map[string]fold.Spent {
	out := map[string]fold.Spent{}
	walk := c.tree.Walk() // preorder: a child after its parent
	for i := len(walk) - 1; i >= 0; i-- {
		id := walk[i]
		if a, ok := c.agent(id); ok {
			out[id] = out[id].Add(a.Spent())
		}
		if p, ok := c.tree.Parent(id); ok && p != "" {
			out[p] = out[p].Add(out[id])
		}
	}
	return out
}
