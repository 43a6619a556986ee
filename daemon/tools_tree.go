package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/tools"
	"github.com/warren-dev/warren/tree"
)

// bootstrapPrompt is the first turn of a spawned child.
const bootstrapPrompt = "You have been spawned. Your task is in your instructions. Start working now; report to your parent with send_message or complete."

// child resolves a direct child of a by name.
func (c *Core) child(a *agent, name string) (*agent, string) {
	id, err := c.tree.ChildByName(a.id, name)
	if err != nil {
		return nil, err.Error()
	}
	ch, ok := c.agent(id)
	if !ok {
		return nil, fmt.Sprintf("no child agent named %q", name)
	}
	return ch, ""
}

func (c *Core) toolSpawn(a *agent, v tools.SpawnAgent, cc callCtx) (toolOutcome, error) {
	if err := tree.ValidateName(v.Name); err != nil {
		return toolErr("%v", err), nil
	}
	if _, err := c.tree.ChildByName(a.id, v.Name); err == nil {
		return toolErr("agent name taken: %s already has a child named %q", c.displayName(a.id), v.Name), nil
	}
	if v.Name == a.name() {
		return toolErr("agent name taken: a child may not have its parent's name %q", v.Name), nil
	}
	if v.Provider != "" {
		if _, err := c.provider(v.Provider); err != nil {
			return toolErr("%v", err), nil
		}
	}
	spec := c.childSpec(a, cc.derivedID("spawn", v.Name), v)
	if err := c.checkAgentText(spec.Instructions, spec.Metadata); err != nil {
		return toolErr("%v", err), nil
	}
	if err := c.checkModel(spec.Provider, &spec.Model); err != nil {
		return toolErr("%v", err), nil
	}
	if prov, err := c.provider(spec.Provider); err != nil {
		return toolErr("%v", err), nil
	} else if err := checkServed(prov, spec.Provider, spec.Model); err != nil {
		return toolErr("%v", err), nil
	}
	if cc.runID == "" {
		// Outside a turn (the tool.call method) the child is created before
		// the call is answered: the acknowledgement means it exists.
		if _, err := c.CreateAgent(c.ctx, spec); err != nil {
			return toolErr("spawning %q failed: %v", v.Name, err), nil
		}
		if ch, okc := c.agent(spec.ID); okc && !c.opts.NoWake {
			c.bootstrap(ch)
		}
		return ok(map[string]any{"status": "accepted", "agent_id": spec.ID, "name": v.Name}), nil
	}
	if !c.deferSpawn(a, spec) {
		return toolErr("agent name taken: %q is already being spawned in this turn", v.Name), nil
	}
	return ok(map[string]any{"status": "accepted", "agent_id": spec.ID, "name": v.Name}), nil
}

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
		m := c.newMessage(newID(), tree.System, parent.id, inbox.KindError,
			fmt.Sprintf("spawning %q failed: %v", spec.Name, err))
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
	switch {
	case a.p.Terminated:
		return "terminated"
	case a.busy:
		return "busy"
	case a.p.Run != nil && !a.p.Run.Ended && a.p.Run.Wait != nil && a.p.Run.Wait.TokenState == tokLive:
		return "waiting"
	}
	return "idle"
}

func (c *Core) toolInspect(a *agent, v tools.InspectAgent) (toolOutcome, error) {
	ch, e := c.child(a, v.Name)
	if ch == nil {
		return toolErr("%s", e), nil
	}
	state := c.stateName(ch)
	ch.mu.Lock()
	md := copyMap(ch.p.Metadata)
	gated := ch.p.Gated
	pendingN := ch.p.Pending.Len()
	msgs := ch.p.Pending.PeekFirst(maxNoticeListed, pageBytes)
	ch.mu.Unlock()
	msgs, err := c.fillPayloads(ch.id, msgs)
	if err != nil {
		return toolOutcome{}, err
	}
	recent := []any{}
	for _, m := range msgs {
		recent = append(recent, map[string]any{"from": c.displayName(m.Sender), "text": m.Payload, "message_id": m.ID})
	}
	return ok(map[string]any{"state": state, "gated": gated, "metadata": md, "recent_messages": recent,
		"pending_messages": pendingN}), nil
}

func (c *Core) toolComplete(a *agent, v tools.Complete, cc callCtx) (toolOutcome, error) {
	parent := a.parentID()
	if parent == "" {
		return toolErr("root agent cannot complete — no parent"), nil
	}
	if len(c.tree.Children(a.id)) > 0 {
		return toolErr("agent has children; terminate them first"), nil
	}
	m := c.newMessage(cc.derivedID("msg", parent), a.id, parent, inbox.KindResponse, v.Result)
	out, err := c.deliver(toolOutcome{result: map[string]any{"status": "completing", "message_id": m.ID},
		messages: []map[string]any{m.EventData()}}, m)
	if err == nil && out.toolErr == "" {
		out.after = func() { c.markCompleting(a) }
	}
	return out, err
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

func (c *Core) toolPoke(a *agent, v tools.Poke) (toolOutcome, error) {
	ch, e := c.child(a, v.AgentName)
	if ch == nil {
		return toolErr("%s", e), nil
	}
	c.poke(ch)
	return ok(map[string]any{"status": "poked", "agent_id": ch.id}), nil
}

func (c *Core) toolListChildren(a *agent) (toolOutcome, error) {
	list := []any{}
	for _, id := range c.tree.Children(a.id) {
		ch, okc := c.agent(id)
		if !okc {
			continue
		}
		state := c.stateName(ch)
		ch.mu.Lock()
		list = append(list, map[string]any{"name": ch.p.Name, "agent_id": id, "state": state,
			"gated": ch.p.Gated, "metadata": copyMap(ch.p.Metadata), "pending_messages": ch.p.Pending.Len()})
		ch.mu.Unlock()
	}
	return ok(map[string]any{"children": list}), nil
}

func (c *Core) toolSetMetadata(a *agent, v tools.SetAgentMetadata) (toolOutcome, error) {
	ch, e := c.child(a, v.AgentName)
	if ch == nil {
		return toolErr("%s", e), nil
	}
	if v.Value != nil {
		ch.mu.Lock()
		md := maps.Clone(ch.p.Metadata)
		ch.mu.Unlock()
		if md == nil {
			md = map[string]string{}
		}
		md[v.Key] = *v.Value
		if err := c.checkAgentText("", md); err != nil {
			return toolErr("%v", err), nil
		}
	}
	if _, err := ch.log.Append(evMetadataUpdated, metadataUpdatedData{Key: v.Key, Value: v.Value}); err != nil {
		return toolOutcome{}, fmt.Errorf("logging metadata.updated: %w", err)
	}
	var val any
	if v.Value != nil {
		val = *v.Value
	}
	return ok(map[string]any{"status": "updated", "agent_name": v.AgentName, "key": v.Key, "value": val}), nil
}

func (c *Core) toolGate(a *agent, name string, gate bool) (toolOutcome, error) {
	ch, e := c.child(a, name)
	if ch == nil {
		return toolErr("%s", e), nil
	}
	action, status := "ungate", "ungated"
	if gate {
		action, status = "gate", "gated"
	}
	if _, err := ch.log.Append(evToolGate, gateData{Action: action, AgentName: name}); err != nil {
		return toolOutcome{}, fmt.Errorf("logging tool.gate: %w", err)
	}
	ch.mu.Lock()
	ch.permit = false
	ch.mu.Unlock()
	if !gate {
		c.wake(ch)
	}
	return ok(map[string]any{"status": status, "agent_name": name}), nil
}

func (c *Core) toolPermit(a *agent, v tools.PermitTurn) (toolOutcome, error) {
	ch, e := c.child(a, v.AgentName)
	if ch == nil {
		return toolErr("%s", e), nil
	}
	ch.mu.Lock()
	gated, busy := ch.p.Gated, ch.busy
	ch.mu.Unlock()
	if !gated {
		return toolErr("agent is not gated"), nil
	}
	if busy {
		return toolErr("agent is not idle"), nil
	}
	if _, err := ch.log.Append(evToolPermit, gateData{AgentName: v.AgentName}); err != nil {
		return toolOutcome{}, fmt.Errorf("logging tool.permit_turn: %w", err)
	}
	ch.mu.Lock()
	ch.permit = true
	ch.mu.Unlock()
	c.wake(ch)
	return ok(map[string]any{"status": "permitted", "agent_name": v.AgentName}), nil
}

// reapply redoes the idempotent effects of a call answered from the log:
// messages it sent are enqueued if the recipient lacks them, a spawn whose
// child does not exist is queued again, a completion is marked again.
func (c *Core) reapply(a *agent, tool string, args map[string]any, rec *recordedCall, cc callCtx) {
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
	e, err := eventlog.ReadSeq(c.fs, c.logPath(parent.id), sp.Ref.Seq, sp.Ref.Off)
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
		c.user.mu.Lock()
		_, has := c.user.seen[s.ID]
		c.user.mu.Unlock()
		return !has
	}
	r, ok := c.agent(s.To)
	if !ok || r.corrupt != nil {
		return false
	}
	r.mu.Lock()
	has := r.p.Enqueued.has(s.ID)
	r.mu.Unlock()
	return !has
}

// readSent reads the envelope of s back from the sender's tool.call entry.
func (c *Core) readSent(sender string, s sentRef) (json.RawMessage, error) {
	e, err := eventlog.ReadSeq(c.fs, c.logPath(sender), s.Ref.Seq, s.Ref.Off)
	if err != nil {
		return nil, err
	}
	var msgs []json.RawMessage
	objectMembers(e.Data, func(k string, v []byte) {
		if k == "messages" {
			arrayElements(v, func(m []byte) { msgs = append(msgs, cloneRaw(m)) })
		}
	})
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
