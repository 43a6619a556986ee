package engine

import "github.com/warren-dev/warren/schema"

// The core's side of the tools that act on children (package toolexec
// holds the tools, package lifecycle orders spawns and completion):
// bootstrap turns and the replay of recorded calls (the messages a
// replayed call recorded are redelivered through mailenv.go).

// bootstrap runs a new child's first turn (respecting its gate).
func (c *Core) bootstrap(ch *agent) {
	ch.mu.Lock()
	gated := ch.p.Gated && !ch.permit
	ch.mu.Unlock()
	if gated {
		return
	}
	if err := c.claim(ch); err != nil {
		return
	}
	ch.mu.Lock()
	ch.permit = false
	ch.mu.Unlock()
	c.startTurn(ch, TurnRequest{Prompt: bootstrapPrompt})
}

// stateName is an agent's state as tools and subscriptions see it.
func (c *Core) stateName(a *agent) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stateLocked()
}

// stateLocked is an agent's state as tools and subscriptions see it. The
// caller holds a.mu.
func (a *agent) stateLocked() string {
	switch {
	case a.p.Terminated:
		return schema.StateTerminated
	case a.busy:
		return schema.StateBusy
	case a.p.Run != nil && !a.p.Run.Ended && a.p.Run.Wait != nil && a.p.Run.Wait.TokenState == tokLive:
		return schema.StateWaiting
	}
	return schema.StateIdle
}

// reapply redoes the idempotent effects of a call answered from the log:
// messages it sent are enqueued if the recipient lacks them, a spawn whose
// child does not exist is queued again, a completion is marked again.
func (c *Core) reapply(a *agent, tool string, args map[string]any, rec *recordedCall) {
	if rec.Error != "" {
		return
	}
	c.redeliverRefs(a.id, rec.Messages, false)
	c.life().Redo(lifeAgent{c, a}, tool, args, rec.Result)
}
