package engine

import "github.com/warren-dev/warren/inbox"

// maxWakeBatch bounds how many pending messages one wake turn shows (and
// pageBytes their total size, beyond the first).
const maxWakeBatch = 100

// hasLiveWait reports whether the agent's latest run waits on a live token.
// The caller holds a.mu.
func (a *agent) hasLiveWait() bool {
	r := a.p.Run
	return r != nil && !r.Ended && r.Wait != nil && r.Wait.TokenState == tokLive
}

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
	c.mu.Lock()
	closed := c.closed || c.recovering
	c.mu.Unlock()
	if closed {
		return
	}
	a.mu.Lock()
	if clearHold {
		a.held = false
	}
	// A log that refuses appends wakes the agent when it heals
	// (logHealed).
	if a.held || a.busy || a.p.Terminated || a.corrupt != nil || a.released != nil || a.p.Pending.Len() == 0 ||
		(a.log != nil && a.log.Degraded() != nil) ||
		(a.p.Gated && !a.permit) || a.hasLiveWait() || a.completing {
		a.mu.Unlock()
		return
	}
	msgs := a.p.Pending.PeekFirst(maxWakeBatch, pageBytes)
	a.busy = true
	a.permit = false
	a.mu.Unlock()
	msgs, err := c.fillPayloads(a.id, msgs)
	if err != nil {
		c.log.Error("cannot wake the agent: its pending messages cannot be read back from its log", "agent", a.id, "err", err)
		a.mu.Lock()
		a.busy = false
		a.mu.Unlock()
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

func (c *Core) agentList() []*agent {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*agent, 0, len(c.agents))
	for _, a := range c.agents {
		out = append(out, a)
	}
	return out
}
