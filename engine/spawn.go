package engine

import (
	"context"
	"encoding/json"

	"github.com/warren-dev/warren/engine/internal/notice"
	"github.com/warren-dev/warren/inbox"
	fold "github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/tools"
	"github.com/warren-dev/warren/tree"
)

// The children a parent spawns (spawn_agent): queued until the parent's
// turn ends (spawnQueue, one per parent, under the parent's record lock),
// then created and started on their bootstrap turn, exactly once across
// crashes (SPEC 6); a failure tells the parent. complete terminates an
// agent after its turn, or now. redo does either again for a call a
// re-run turn answers from the log.

// bootstrapPrompt is the first turn of a spawned child.
const bootstrapPrompt = "You have been spawned. Your task is in your instructions. Start working now; report to your parent with send_message or complete."

// deferSpawn queues the creation of a child until the parent's turn ends
// (or creates it now when the parent is not in a turn). A crash before the
// creation is finished by recovery (the tool.call records the spawn).
func (c *Core) deferSpawn(parent *agent, spec CreateSpec) bool {
	ok, now := parent.Defer(spec, func() { c.spawn(parent, spec) })
	if now {
		c.spawn(parent, spec)
	}
	return ok
}

// spawn creates a child of parent and starts its bootstrap turn; a
// failure is told to the parent.
func (c *Core) spawn(parent *agent, spec CreateSpec) {
	defer c.grants.done(parent.ID(), spec.ID)
	parent.Spawned(spec.ID)
	if _, ok := c.agent(spec.ID); ok {
		return // created already (a re-run turn spawned it again)
	}
	id, err := c.CreateAgent(c.ctx, spec)
	if err != nil {
		c.log.Error("deferred spawn failed", "parent", parent.ID(), "name", spec.Name, "err", err)
		m := c.newMessage(newID(), tree.System, parent.ID(), inbox.KindError, notice.SpawnFailed(spec.Name, err))
		if err := c.enqueue(m); err != nil {
			c.log.Error("reporting a failed spawn", "parent", parent.ID(), "err", err)
		}
		return
	}
	ch, ok := c.agent(id)
	if !ok || c.opts.NoWake {
		return
	}
	c.bootstrap(ch)
}

// respawn creates the child a recorded spawn_agent call of parent
// accepted (recovery: the crash came before the child's creation).
func (c *Core) respawn(ctx context.Context, parent *agent, sp fold.Spawn) {
	var args map[string]any
	e, err := c.st.ReadSeq(ctx, parent.ID(), sp.Ref.Seq, sp.Ref.Off)
	if err == nil {
		var d struct {
			Args json.RawMessage `json:"args"`
		}
		if err = json.Unmarshal(e.Data, &d); err == nil {
			err = json.Unmarshal(d.Args, &args)
		}
	}
	if err != nil {
		c.log.Error("a recorded spawn_agent call is malformed", "parent", parent.ID(), "err", err)
		return
	}
	parsed, err := tools.Parse("spawn_agent", args)
	v, okp := parsed.(tools.SpawnAgent)
	if err != nil || !okp {
		c.log.Error("a recorded spawn_agent call is malformed", "parent", parent.ID(), "err", err)
		return
	}
	c.spawn(parent, childSpec(parent.ID(), parent.Inherit(), sp.ChildID, v))
}

// childSpec is the spec of child id spawned by parentID with the call v:
// it inherits the parent's provider and model unless the call names them,
// and the parent's working directory.
func childSpec(parentID string, in inherited, id string, v tools.SpawnAgent) CreateSpec {
	prov, model := in.Provider, in.Model
	if v.Provider != "" && v.Provider != prov {
		prov, model = v.Provider, ""
	}
	if v.Model != "" {
		model = v.Model
	}
	spec := CreateSpec{ID: id, Name: v.Name, ParentID: parentID, Instructions: v.Instructions,
		Provider: prov, Model: model, Metadata: v.Metadata, Cwd: in.Cwd, Bootstrap: true}
	if v.Budget != nil {
		b := *v.Budget
		b.By = parentID
		spec.Budget = &b
	}
	if v.Workspace != "none" {
		// Resolved when the child is made (after the turn that spawns it
		// has ended and recorded its workspace): nothing when the parent
		// has no workspace.
		spec.Workspace = &WorkspaceRequest{FromParent: true}
	}
	return spec
}

// redo redoes the lifecycle effects of a call of a that a re-run turn
// answers from the log: a spawn whose child does not exist is queued
// again, a completion is marked again. result is the call's recorded
// result.
func (c *Core) redo(a *agent, tool string, args map[string]any, result json.RawMessage) {
	switch tool {
	case "spawn_agent":
		var res struct {
			AgentID string `json:"agent_id"`
		}
		_ = json.Unmarshal(result, &res)
		id := res.AgentID
		if _, ok := c.agent(id); id != "" && !ok {
			parsed, err := tools.Parse(tool, args)
			if v, okp := parsed.(tools.SpawnAgent); err == nil && okp {
				c.deferSpawn(a, childSpec(a.ID(), a.Inherit(), id, v))
			}
		}
	case "complete":
		c.complete(a)
	case "merge_child":
		// The re-run's restore took the merge back out of the worktree:
		// merge again (the child's branch is what it was).
		parsed, err := tools.Parse(tool, args)
		if v, ok := parsed.(tools.MergeChild); err == nil && ok {
			x := toolExec{c: c, ctx: c.ctx, self: a.ID()}
			if id, e := x.childAnyState(v.AgentName); e == "" {
				if _, err := c.MergeChild(c.ctx, id); err != nil {
					c.log.Warn("merging a child again for a re-run", "agent", a.ID(), "child", id, "err", err)
				}
			}
		}
	}
}

// complete terminates a after its current turn, or now when it runs none
// (the complete tool).
func (c *Core) complete(a *agent) {
	if a.Completing() {
		return
	}
	if err := c.terminate(c.ctx, a); err != nil {
		c.log.Error("terminating a completed agent", "agent", a.ID(), "err", err)
	}
}

// bootstrap starts a new child's first turn (bootstrapPrompt), unless it
// is gated or cannot be claimed.
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

// reapply redoes what a recorded call did beyond its log entry, for a
// re-run turn that answers it from the log: the messages it sent that
// their recipients lack, a spawn or a completion.
func (c *Core) reapply(a *agent, tool string, args map[string]any, rec *recordedCall) {
	if rec.Error != "" {
		return
	}
	c.redeliverRefs(c.ctx, a.ID(), rec.Messages, false)
	c.redo(a, tool, args, rec.Result)
}

// The tools' side of spawning and completion (spawn_agent and complete,
// through the tools): each names its agent by id, and an
// agent that is gone is nothing to act on.

// childOf is childSpec for the parent named parentID; a parent that is
// gone passes nothing on (the call's own provider, model and no working
// directory).
func (c *Core) childOf(parentID, id string, v tools.SpawnAgent) CreateSpec {
	var in inherited
	if p, ok := c.agent(parentID); ok {
		in = p.Inherit()
	}
	return childSpec(parentID, in, id, v)
}

// checkChild checks a child's spec as spawn_agent does before it accepts
// the call, in this order: its instructions and metadata against the
// limits, its model (filled in from the provider entry's default), its
// provider, and the provider serving the model.
func (c *Core) checkChild(spec *CreateSpec) error {
	if err := c.checkDepth(spec.ParentID); err != nil {
		return err
	}
	if err := c.checkAgentText(spec.Instructions, spec.Metadata); err != nil {
		return err
	}
	if err := c.checkModel(spec.Provider, &spec.Model); err != nil {
		return err
	}
	prov, err := c.provider(spec.Provider)
	if err != nil {
		return err
	}
	return checkServed(prov, spec.Provider, spec.Model)
}

// createChild creates a child now (its parent runs no turn) and starts
// its bootstrap turn, unless NoWake.
func (c *Core) createChild(spec CreateSpec) error {
	defer c.grants.done(spec.ParentID, spec.ID)
	if _, err := c.CreateAgent(c.ctx, spec); err != nil {
		return err
	}
	if ch, ok := c.agent(spec.ID); ok && !c.opts.NoWake {
		c.bootstrap(ch)
	}
	return nil
}

// deferSpawnOf is deferSpawn for the parent named parentID; false when it
// is gone.
func (c *Core) deferSpawnOf(parentID string, spec CreateSpec) bool {
	p, ok := c.agent(parentID)
	if !ok {
		return false
	}
	return c.deferSpawn(p, spec)
}

// markCompleting is complete for the agent named id; nothing when it is
// gone.
func (c *Core) markCompleting(id string) {
	if a, ok := c.agent(id); ok {
		c.complete(a)
	}
}

// spawnQueue holds the children a parent spawned in its current turn,
// created when the turn ends. The record's lock guards it (agent.Defer,
// agent.Spawned).
type spawnQueue struct{ specs []CreateSpec }

// Defer decides a spawn of spec by its parent: a child of the same name
// queued already makes it a repeat (ok when it is the same child, and
// nothing is done); otherwise it is queued while the parent is in a turn
// (inTurn) or is to be created now.
func (s *spawnQueue) Defer(spec CreateSpec, inTurn bool) (ok, queued, now bool) {
	for _, q := range s.specs {
		if q.Name == spec.Name {
			return q.ID == spec.ID, false, false
		}
	}
	if inTurn {
		s.specs = append(s.specs, spec)
		return true, true, false
	}
	return true, false, true
}

// Done takes the spawn of child id off the queue.
func (s *spawnQueue) Done(id string) {
	for i, q := range s.specs {
		if q.ID == id {
			s.specs = append(s.specs[:i], s.specs[i+1:]...)
			return
		}
	}
}
