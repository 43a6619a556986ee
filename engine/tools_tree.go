package engine

// The core's side of the tools that act on children (package toolexec
// holds the tools, package lifecycle orders spawns and completion):
// bootstrap turns and the replay of recorded calls (the messages a
// replayed call recorded are redelivered through mailenv.go).

// bootstrap runs a new child's first turn (respecting its gate).
func (c *Core) bootstrap(ch *agent) {
	if ch.Gated() {
		return
	}
	if err := ch.Claim(); err != nil {
		return
	}
	ch.SetPermit(false)
	c.startTurn(ch, TurnRequest{Prompt: bootstrapPrompt})
}

// reapply redoes the idempotent effects of a call answered from the log:
// messages it sent are enqueued if the recipient lacks them, a spawn whose
// child does not exist is queued again, a completion is marked again.
func (c *Core) reapply(a *agent, tool string, args map[string]any, rec *recordedCall) {
	if rec.Error != "" {
		return
	}
	c.redeliverRefs(a.ID(), rec.Messages, false)
	c.life().Redo(lifeAgent{a, c}, tool, args, rec.Result)
}
