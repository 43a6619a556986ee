package engine

import "github.com/warren-dev/warren/inbox"

// maxWakeBatch bounds how many pending messages one wake turn shows (and
// pageBytes their total size, beyond the first).
const maxWakeBatch = 100

// wake starts a turn for an idle agent with pending messages. The turn's
// prompt shows the messages; their ids go into turn.start and count as
// delivered when turn.complete is logged. Messages arriving during the turn
// wait for the next one.
func (c *Core) wake(a *agent) { c.wakeIf(a, false) }

// poke wakes an agent even after a failed turn.
func (c *Core) poke(a *agent) { c.wakeIf(a, true) }

func (c *Core) wakeIf(a *agent, clearHold bool) {
	if c.opts.NoWake {
		return
	}
	if c.agents.WakesHeld() {
		return
	}
	// A log that refuses appends wakes the agent when it heals
	// (logHealed).
	msgs, ok := a.TakeWake(clearHold, maxWakeBatch, pageBytes)
	if !ok {
		return
	}
	msgs, err := c.fillPayloads(c.ctx, a.ID(), msgs)
	if err != nil {
		c.log.Error("cannot wake the agent: its pending messages cannot be read back from its log", "agent", a.ID(), "err", err)
		a.Unclaim()
		return
	}
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	c.startTurn(a, TurnRequest{Prompt: inbox.FormatPrompt(msgs, c.displayName), MessageIDs: ids})
}

// WakeAll wakes every agent with pending messages.
func (c *Core) WakeAll() {
	for _, a := range c.agentList() {
		c.wake(a)
	}
}

func (c *Core) agentList() []*agent { return c.agents.List() }
