package engine

import (
	"maps"
	"sync"

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

// SubtreeSpent is what agent id and every agent below it spent, the
// terminated ones included.
func (c *Core) SubtreeSpent(id string) fold.Spent {
	sum := c.goneUnder()[id]
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
	out := maps.Clone(c.goneUnder())
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

// goneUnder is, for each agent, what the terminated agents below it
// spent, recomputed when the registry of terminated agents changed (their
// logs read once each, when a sum first needs them).
func (c *Core) goneUnder() map[string]fold.Spent {
	c.goneSums.mu.Lock()
	defer c.goneSums.mu.Unlock()
	if c.goneSums.m != nil && c.goneSums.gen == c.agents.GoneGen() {
		return c.goneSums.m
	}
	gen, gone := c.agents.GoneSpends(func(id string) *goneInfo { return c.readGoneInfo(c.ctx, id) })
	m := map[string]fold.Spent{}
	for _, g := range gone {
		for p, hops := g.parentID, 0; p != "" && hops < 1024; hops++ {
			m[p] = m[p].Add(g.spent)
			if pg, ok := gone[p]; ok {
				p = pg.parentID
				continue
			}
			parent, ok := c.tree.Parent(p)
			if !ok {
				break
			}
			p = parent
		}
	}
	c.goneSums.m, c.goneSums.gen = m, gen
	return m
}

// goneSums caches goneUnder.
type goneSums struct {
	mu  sync.Mutex
	gen int
	m   map[string]fold.Spent
}
