package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/warren-dev/warren/notice"
	fold "github.com/warren-dev/warren/projection"

	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/tools"
	"github.com/warren-dev/warren/tree"
)

// The core's side of the tools that act on children (package toolexec
// holds the tools): deferred and replayed spawns, bootstrap turns,
// completion, and the redelivery of messages a replayed call recorded.

// bootstrapPrompt is the first turn of a spawned child.
const bootstrapPrompt = "You have been spawned. Your task is in your instructions. Start working now; report to your parent with send_message or complete."

// deferSpawn queues the creation of a child until the parent's turn ends
// (or runs it now when the parent is not in a turn). A crash before the
// creation is finished by recovery (the tool.call records the spawn).
func (c *Core) deferSpawn(a *agent, spec CreateSpec) bool {
	a.mu.Lock()
	for _, s := range a.pendingSpawns {
		if s.Name == spec.Name {
			a.mu.Unlock()
			return s.ID == spec.ID
		}
	}
	inTurn := a.busy
	if inTurn {
		a.pendingSpawns = append(a.pendingSpawns, spec)
		a.deferred = append(a.deferred, func() { c.spawnNow(a, spec) })
	}
	a.mu.Unlock()
	if !inTurn {
		c.spawnNow(a, spec)
	}
	return true
}

// spawnNow creates a child and starts its bootstrap turn.
func (c *Core) spawnNow(parent *agent, spec CreateSpec) {
	parent.mu.Lock()
	for i, s := range parent.pendingSpawns {
		if s.ID == spec.ID {
			parent.pendingSpawns = append(parent.pendingSpawns[:i], parent.pendingSpawns[i+1:]...)
			break
		}
	}
	parent.mu.Unlock()
	if _, exists := c.agent(spec.ID); exists {
		return
	}
	id, err := c.CreateAgent(c.ctx, spec)
	if err != nil {
		c.log.Error("deferred spawn failed", "parent", parent.id, "name", spec.Name, "err", err)
		m := c.newMessage(newID(), tree.System, parent.id, inbox.KindError, notice.SpawnFailed(spec.Name, err))
		if err := c.enqueue(m); err != nil {
			c.log.Error("reporting a failed spawn", "parent", parent.id, "err", err)
		}
		return
	}
	ch, ok := c.agent(id)
	if !ok || c.opts.NoWake {
		return
	}
	c.bootstrap(ch)
}

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

// markCompleting terminates the agent after its current turn, or now when
// it runs none.
func (c *Core) markCompleting(a *agent) {
	a.mu.Lock()
	inTurn := a.busy
	a.completing = inTurn
	a.mu.Unlock()
	if !inTurn {
		if err := c.terminate(a); err != nil {
			c.log.Error("terminating a completed agent", "agent", a.id, "err", err)
		}
	}
}

// reapply redoes the idempotent effects of a call answered from the log:
// messages it sent are enqueued if the recipient lacks them, a spawn whose
// child does not exist is queued again, a completion is marked again.
func (c *Core) reapply(a *agent, tool string, args map[string]any, rec *recordedCall) {
	if rec.Error != "" {
		return
	}
	c.redeliverRefs(a.id, rec.Messages, false)
	switch tool {
	case "spawn_agent":
		var res struct {
			AgentID string `json:"agent_id"`
		}
		_ = json.Unmarshal(rec.Result, &res)
		id := res.AgentID
		if _, exists := c.agent(id); id != "" && !exists {
			parsed, err := tools.Parse(tool, args)
			if v, okp := parsed.(tools.SpawnAgent); err == nil && okp {
				c.deferSpawn(a, c.childSpec(a, id, v))
			}
		}
	case "complete":
		c.markCompleting(a)
	}
}

// respawn creates a child a recorded spawn_agent call accepted.
func (c *Core) respawn(parent *agent, sp spawnRec) {
	var args map[string]any
	e, err := c.st.ReadSeq(context.Background(), parent.id, sp.Ref.Seq, sp.Ref.Off)
	if err == nil {
		var d struct {
			Args json.RawMessage `json:"args"`
		}
		if err = json.Unmarshal(e.Data, &d); err == nil {
			err = json.Unmarshal(d.Args, &args)
		}
	}
	if err != nil {
		c.log.Error("a recorded spawn_agent call is malformed", "parent", parent.id, "err", err)
		return
	}
	parsed, err := tools.Parse("spawn_agent", args)
	v, okp := parsed.(tools.SpawnAgent)
	if err != nil || !okp {
		c.log.Error("a recorded spawn_agent call is malformed", "parent", parent.id, "err", err)
		return
	}
	c.spawnNow(parent, c.childSpec(parent, sp.ChildID, v))
}

// childSpec is the CreateSpec of a child spawned by parent: it inherits the
// parent's provider and model unless the call names them.
func (c *Core) childSpec(parent *agent, id string, v tools.SpawnAgent) CreateSpec {
	parent.mu.Lock()
	prov, model, cwd := parent.p.Provider, parent.p.Model, parent.p.Cwd
	parent.mu.Unlock()
	if v.Provider != "" && v.Provider != prov {
		prov, model = v.Provider, ""
	}
	if v.Model != "" {
		model = v.Model
	}
	return CreateSpec{ID: id, Name: v.Name, ParentID: parent.id, Instructions: v.Instructions,
		Provider: prov, Model: model, Metadata: v.Metadata, Cwd: cwd}
}

// redeliverRefs enqueues messages the sender's log records whose
// recipient lacks them (a crash between the sender's record and the
// recipient's enqueue), reading their envelopes back from the sender's log.
// agentsOnly leaves out messages to USER (recovery's rule).
func (c *Core) redeliverRefs(sender string, refs []sentRef, agentsOnly bool) {
	for _, s := range refs {
		if !c.lacks(s, agentsOnly) {
			continue
		}
		raw, err := c.readSent(sender, s)
		if err != nil {
			c.log.Error("cannot read back a message its sender recorded", "sender", sender, "message", s.ID, "err", err)
			continue
		}
		if agentsOnly {
			c.log.Warn("delivering a message its sender recorded but its recipient never got", "message", s.ID, "to", s.To)
		}
		c.redeliverOne(raw)
	}
}

// lacks reports whether the recipient of s exists and has not got it.
func (c *Core) lacks(s sentRef, agentsOnly bool) bool {
	if s.To == tree.User {
		if agentsOnly || c.user == nil {
			return false
		}
		return !c.user.Has(s.ID)
	}
	r, ok := c.agent(s.To)
	if !ok || r.corrupt != nil {
		return false
	}
	r.mu.Lock()
	has := r.p.Enqueued.Has(s.ID)
	r.mu.Unlock()
	return !has
}

// readSent reads the envelope of s back from the sender's tool.call entry.
func (c *Core) readSent(sender string, s sentRef) (json.RawMessage, error) {
	e, err := c.st.ReadSeq(context.Background(), sender, s.Ref.Seq, s.Ref.Off)
	if err != nil {
		return nil, err
	}
	msgs := fold.SentEnvelopes(e.Data)
	if s.Index >= len(msgs) {
		return nil, fmt.Errorf("the tool.call at seq %d of %s records %d messages, not %d", s.Ref.Seq, sender, len(msgs), s.Index+1)
	}
	return msgs[s.Index], nil
}

func (c *Core) redeliverOne(raw json.RawMessage) {
	m, err := inbox.FromEventData(raw)
	if err != nil {
		c.log.Warn("a recorded message is malformed", "err", err)
		return
	}
	// The sender's log already records it as sent: the limits, which
	// refuse new sends, do not refuse it.
	skip, err := c.checkEnqueue(m)
	if errors.Is(err, errInboxFull) {
		err = nil
	}
	if err == nil && !skip {
		err = c.appendEnqueue(m)
	}
	if err != nil {
		c.log.Warn("redelivering a recorded message", "message", m.ID, "err", err)
	}
}
