package engine

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/warren-dev/warren/engine/internal/notice"
	"github.com/warren-dev/warren/engine/internal/redeliver"
	"github.com/warren-dev/warren/eventlog"

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
