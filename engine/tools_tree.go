package engine

import (
	"context"
	"errors"

	"github.com/warren-dev/warren/engine/internal/redeliver"
	"github.com/warren-dev/warren/eventlog"

	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/tree"
)

// The core's side of the tools that act on children (package toolexec
// holds the tools, package lifecycle orders spawns and completion):
// bootstrap turns, the replay of recorded calls, and the redelivery of
// messages a replayed call recorded.

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

// redeliverRefs enqueues messages the sender's log records whose
// recipient lacks them (package redeliver). agentsOnly leaves out messages
// to USER (recovery's rule).
func (c *Core) redeliverRefs(sender string, refs []sentRef, agentsOnly bool) {
	redeliver.Refs(redeliverEnv{c}, c.log, sender, refs, agentsOnly)
}

// redeliverEnv is the Core as redeliver.Env.
type redeliverEnv struct{ c *Core }

// Lacks reports whether the recipient of s exists and has not got it.
func (r redeliverEnv) Lacks(s sentRef, agentsOnly bool) bool {
	c := r.c
	if s.To == tree.User {
		if agentsOnly || c.user == nil {
			return false
		}
		return !c.user.Has(s.ID)
	}
	a, ok := c.agent(s.To)
	if !ok || a.corrupt != nil {
		return false
	}
	a.mu.Lock()
	has := a.p.Enqueued.Has(s.ID)
	a.mu.Unlock()
	return !has
}

func (r redeliverEnv) ReadSeq(ctx context.Context, id string, seq uint64, hint int64) (eventlog.Entry, error) {
	return r.c.st.ReadSeq(ctx, id, seq, hint)
}

// Deliver enqueues a recorded message unless its recipient has it; the
// limits do not refuse it (the sender's log records it as sent).
func (r redeliverEnv) Deliver(m inbox.Message) error {
	skip, err := r.c.checkEnqueue(m)
	if errors.Is(err, errInboxFull) {
		err = nil
	}
	if err == nil && !skip {
		err = r.c.appendEnqueue(m)
	}
	return err
}
