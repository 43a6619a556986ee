package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	fold "github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/tools"
)

// Budgets (SPEC 13): a limit in tokens, dollars or turns on an agent's
// subtree, logged as budget.set (the totals in force). Spend is the
// accounting's (usage.go). A budget a parent granted its child
// (spawn_agent's budget, By = the parent's id) is reserved from the
// parent's remaining: what the child has not spent of it is held back
// from the parent's other spending, and the child's checks stop at its own
// envelope. Before each turn and each model request, the agent's budget
// and its ancestors' (up to the first granted envelope) are checked; when
// one is spent, the run suspends with a wait of kind budget (a token,
// warren waits, a notification). agent.budget with more resumes it: the
// run is re-run, its tool calls answered from the log and its model
// requests made (and charged) again. agent.cancel ends it.

// budgetWaitFor bounds a budget wait (a month: it waits for the operator).
const budgetWaitFor = 30 * 24 * time.Hour

// BudgetChange is an agent.budget: the limits given (nil: not given) and
// whether they raise the current ones (Add) or replace them.
type BudgetChange struct {
	Tokens *int64
	USD    *float64
	Turns  *int64
	Add    bool
}

// checkBudgetFor refuses a budget an agent on provider prov and model
// cannot have: a negative limit, or dollars without a price for the model.
func (c *Core) checkBudgetFor(prov, model string, b *schema.BudgetSetData) error {
	if b == nil {
		return nil
	}
	if (b.Tokens != nil && *b.Tokens < 0) || (b.USD != nil && *b.USD < 0) || (b.Turns != nil && *b.Turns < 0) {
		return failf(ErrInvalid, "a budget's limits must be 0 or more")
	}
	if (b.Tokens != nil || b.USD != nil) && !c.config().ReportsUsage(prov) {
		return failf(ErrInvalid, "the agents of %s report no token usage (its \"usage\" setting, or Gemini CLI's ACP): give it a turns budget only", prov)
	}
	if b.USD != nil {
		if _, ok := c.config().PriceOf(prov, model); !ok {
			return failf(ErrInvalid, "a dollar budget needs a price for %s/%s: add \"prices\": {\"%s/%s\": {\"input_per_mtok\": ..., \"output_per_mtok\": ..., \"cache_read_per_mtok\": ..., \"cache_write_per_mtok\": ...}} to config.json (a price is never guessed), or budget tokens or turns",
				prov, model, prov, model)
		}
	}
	return nil
}

// SetBudget changes agent id's budget and logs budget.set with the totals
// in force; runs of its subtree waiting on a budget that now has room are
// resumed.
func (c *Core) SetBudget(ctx context.Context, id string, ch BudgetChange) (schema.BudgetSetData, error) {
	a, ok := c.agent(id)
	if !ok {
		return schema.BudgetSetData{}, notFound(id)
	}
	cur := a.BudgetSet()
	next := schema.BudgetSetData{By: schema.ByOperator}
	if cur != nil {
		next.Tokens, next.USD, next.Turns = cur.Tokens, cur.USD, cur.Turns
	}
	next.Tokens = mergeLimit(next.Tokens, ch.Tokens, ch.Add)
	next.USD = mergeLimit(next.USD, ch.USD, ch.Add)
	next.Turns = mergeLimit(next.Turns, ch.Turns, ch.Add)
	prov, model := a.ProviderModel()
	if err := c.checkBudgetFor(prov, model, &next); err != nil {
		return next, err
	}
	if _, err := a.Append(schema.BudgetSet, next); err != nil {
		return next, fmt.Errorf("logging budget.set: %w", err)
	}
	c.resumeBudgetWaits(id)
	return next, nil
}

// mergeLimit is a limit after a change: v replaces cur, or with add
// raises it (an unlimited one stays unlimited).
func mergeLimit[T int64 | float64](cur, v *T, add bool) *T {
	switch {
	case v == nil:
		return cur
	case add && cur == nil:
		return nil
	case add:
		sum := *cur + *v
		return &sum
	}
	n := *v
	return &n
}

// resumeBudgetWaits resumes the runs of id's subtree that wait on a
// budget and are no longer blocked.
func (c *Core) resumeBudgetWaits(id string) {
	for _, d := range c.tree.Subtree(id) {
		a, ok := c.agent(d)
		if !ok {
			continue
		}
		ws := a.WaitState()
		if w := ws.Run.Wait; !ws.LiveWait || w == nil || w.Kind != schema.WaitBudget {
			continue
		}
		if why, _ := c.budgetSpent(a); why != "" {
			continue
		}
		tokenID := ws.Run.Wait.TokenID
		// Tracked work: a stop waits for it, and none starts after (the
		// run stays waiting; the next start resumes it, as recovery does).
		if !c.goBackground(func() {
			if _, err := c.ResumeWith(c.ctx, d, ResumeOptions{TokenID: tokenID, Response: "budget raised"}); err != nil {
				c.log.Warn("resuming a run after its budget was raised", "agent", d, "err", err)
			}
		}) {
			c.log.Warn("the daemon is stopping: a run whose budget was raised stays waiting", "agent", d, "token_id", tokenID)
		}
	}
}

// budgetSpent says which budget blocks agent a's next turn or model
// request, and whose it is ("" when none): its own, then each
// ancestor's, up to the first envelope a parent granted (reserved from
// that parent's budget).
func (c *Core) budgetSpent(a *agent) (why, whose string) {
	for n := a.ID(); n != ""; {
		an, ok := c.agent(n)
		if !ok {
			return "", ""
		}
		b := an.BudgetSet()
		if b != nil {
			if why := c.overBudget(n, b); why != "" {
				return why, c.refOf(n)
			}
			if b.By != "" && b.By != schema.ByOperator {
				return "", "" // a granted envelope: reserved in the parent's
			}
		}
		parent, ok := c.tree.Parent(n)
		if !ok || parent == "" {
			return "", ""
		}
		n = parent
	}
	return "", ""
}

// overBudget says whether agent n's budget b is spent: its subtree's
// spend plus what it granted its children and they have not spent yet.
func (c *Core) overBudget(n string, b *schema.BudgetSetData) string {
	used := c.committed(n, c.SubtreeSpent(n), c.grants.sum(n))
	name := c.refOf(n)
	switch {
	case b.Tokens != nil && used.Tokens >= *b.Tokens:
		return fmt.Sprintf("the token budget of %s is spent (%d of %d)", name, used.Tokens, *b.Tokens)
	case b.USD != nil && used.USD >= *b.USD:
		return fmt.Sprintf("the dollar budget of %s is spent ($%.4f of $%.4f)", name, used.USD, *b.USD)
	case b.Turns != nil && int64(used.Turns) >= *b.Turns:
		return fmt.Sprintf("the turn budget of %s is spent (%d of %d)", name, used.Turns, *b.Turns)
	}
	return ""
}

// reserved is what n's children hold of the envelopes n granted them and
// have not spent.
func (c *Core) reserved(n string) fold.Spent {
	var r fold.Spent
	for _, ch := range c.tree.Children(n) {
		a, ok := c.agent(ch)
		if !ok {
			continue
		}
		b := a.BudgetSet()
		if b == nil || b.By != n {
			continue
		}
		s := c.SubtreeSpent(ch)
		if b.Tokens != nil {
			r.Tokens += max(0, *b.Tokens-s.Tokens)
		}
		if b.USD != nil {
			r.USD += max(0, *b.USD-s.USD)
		}
		if b.Turns != nil {
			r.Turns += max(0, int(*b.Turns)-s.Turns)
		}
	}
	return r
}

// budgetGate is the check before a turn or a model request of run t:
// with a budget spent, the run suspends on a wait of kind budget
// (provider.ErrRunSuspended).
func (c *Core) budgetGate(a *agent, t turnPlan) error {
	why, whose := c.budgetSpent(a)
	if why == "" {
		return nil
	}
	prompt := why + "; raise it (warren agent budget " + whose + " --add --tokens N, --usd X or --turns N) and the run goes on, or end it (warren agent cancel " + c.refOf(a.ID()) + ")"
	return c.beginWait(a, tools.AwaitInput{Kind: schema.WaitBudget, Prompt: prompt, Timeout: budgetWaitFor}, t.RunID, t.Turn)
}

// grantable says whether parent can grant a child budget g: each limit
// given must fit in what remains of parent's own budget (where it has
// one); "" when it fits, else why not.
func (c *Core) grantable(parent string, g *schema.BudgetSetData, inflight fold.Spent) string {
	pa, ok := c.agent(parent)
	if !ok {
		return "the parent is gone"
	}
	b := pa.BudgetSet()
	if b == nil {
		return ""
	}
	used := c.committed(parent, c.SubtreeSpent(parent), inflight)
	switch {
	case b.Tokens != nil && g.Tokens != nil && *g.Tokens > *b.Tokens-used.Tokens:
		return fmt.Sprintf("a grant of %d tokens is more than the %d left of your budget", *g.Tokens, max(0, *b.Tokens-used.Tokens))
	case b.USD != nil && g.USD != nil && *g.USD > *b.USD-used.USD:
		return fmt.Sprintf("a grant of $%.4f is more than the $%.4f left of your budget", *g.USD, max(0, *b.USD-used.USD))
	case b.Turns != nil && g.Turns != nil && *g.Turns > *b.Turns-int64(used.Turns):
		return fmt.Sprintf("a grant of %d turns is more than the %d left of your budget", *g.Turns, max(0, *b.Turns-int64(used.Turns)))
	}
	return ""
}

// grant checks the envelope spec asks parent to grant (spawn_agent's
// budget) against what remains of parent's budget and holds it until the
// child is created; "" when it fits (or there is none), else why not.
func (c *Core) grant(parent string, spec *CreateSpec) string {
	if spec.Budget == nil {
		return ""
	}
	c.grants.mu.Lock()
	defer c.grants.mu.Unlock()
	if why := c.grantable(parent, spec.Budget, c.grants.of(parent)); why != "" {
		return why
	}
	if c.grants.m == nil {
		c.grants.m = map[string]map[string]fold.Spent{}
	}
	if c.grants.m[parent] == nil {
		c.grants.m[parent] = map[string]fold.Spent{}
	}
	g, b := fold.Spent{}, spec.Budget
	if b.Tokens != nil {
		g.Tokens = *b.Tokens
	}
	if b.USD != nil {
		g.USD = *b.USD
	}
	if b.Turns != nil {
		g.Turns = int(*b.Turns)
	}
	c.grants.m[parent][spec.ID] = g
	return ""
}

// inflightGrants are the grants of spawns not created yet, parent -> child
// id -> the grant.
type inflightGrants struct {
	mu sync.Mutex
	m  map[string]map[string]fold.Spent
}

// done forgets child's grant (it was created, or failed).
func (g *inflightGrants) done(parent, child string) {
	g.mu.Lock()
	delete(g.m[parent], child)
	g.mu.Unlock()
}

// sum is what parent's spawns in flight hold.
func (g *inflightGrants) sum(parent string) fold.Spent {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.of(parent)
}

// of is sum with g.mu held.
func (g *inflightGrants) of(parent string) fold.Spent {
	var s fold.Spent
	for _, x := range g.m[parent] {
		s = s.Add(x)
	}
	return s
}

// committed is what counts against agent n's budget: its subtree's spend,
// what it granted its children and they have not spent, and what its
// running turns are granting (inflight).
func (c *Core) committed(n string, subtree, inflight fold.Spent) fold.Spent {
	return subtree.Add(c.reserved(n)).Add(inflight)
}

// BudgetOf is agent id's budget and what remains of it (BudgetLeft with
// its subtree's spend); false when it has none.
func (c *Core) BudgetOf(id string) (*schema.BudgetSetData, map[string]any, bool) {
	return c.BudgetLeft(id, c.SubtreeSpent(id))
}

// BudgetLeft is agent id's budget and what remains of it, given its
// subtree's spend (SubtreeSpent, or agent.list's SubtreeSpends); false when
// it has none.
func (c *Core) BudgetLeft(id string, subtree fold.Spent) (*schema.BudgetSetData, map[string]any, bool) {
	a, ok := c.agent(id)
	if !ok {
		return nil, nil, false
	}
	b := a.BudgetSet()
	if b == nil {
		return nil, nil, false
	}
	used := c.committed(id, subtree, c.grants.sum(id))
	left := map[string]any{"tokens": nil, "usd": nil, "turns": nil}
	if b.Tokens != nil {
		left["tokens"] = max(0, *b.Tokens-used.Tokens)
	}
	if b.USD != nil {
		left["usd"] = max(0, *b.USD-used.USD)
	}
	if b.Turns != nil {
		left["turns"] = max(0, *b.Turns-int64(used.Turns))
	}
	return b, left, true
}

// refOf is how commands name agent id: its path, else its id.
func (c *Core) refOf(id string) string {
	if p := c.tree.Path(id); p != "" {
		return p
	}
	return id
}
