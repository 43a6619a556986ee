package lifecycle

import (
	"context"
	"encoding/json"

	"github.com/warren-dev/warren/engine/internal/notice"
	fold "github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/tools"
)

// BootstrapPrompt is the first turn of a spawned child.
const BootstrapPrompt = "You have been spawned. Your task is in your instructions. Start working now; report to your parent with send_message or complete."

// Spawns are the children a parent spawned in its current turn, created
// when the turn ends. The caller guards it (the engine: the parent's
// a.mu).
type Spawns struct{ specs []Spec }

// Defer decides a spawn of spec by its parent: a child of the same name
// queued already makes it a repeat (ok when it is the same child, and
// nothing is done); otherwise it is queued while the parent is in a turn
// (inTurn) or is to be created now.
func (s *Spawns) Defer(spec Spec, inTurn bool) (ok, queued, now bool) {
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
func (s *Spawns) Done(id string) {
	for i, q := range s.specs {
		if q.ID == id {
			s.specs = append(s.specs[:i], s.specs[i+1:]...)
			return
		}
	}
}

// Defer queues the creation of a child until the parent's turn ends (or
// creates it now when the parent is not in a turn). A crash before the
// creation is finished by recovery (the tool.call records the spawn).
func (l Lifecycle) Defer(parent Agent, spec Spec) bool {
	ok, now := parent.Defer(spec, func() { l.Spawn(parent, spec) })
	if now {
		l.Spawn(parent, spec)
	}
	return ok
}

// Spawn creates a child of parent and starts its bootstrap turn; a
// failure is told to the parent.
func (l Lifecycle) Spawn(parent Agent, spec Spec) {
	parent.Spawned(spec.ID)
	if _, err := l.Host.Lookup(spec.ID); err == nil {
		return
	}
	id, err := l.Create(l.Ctx, spec)
	if err != nil {
		l.Log.Error("deferred spawn failed", "parent", parent.ID(), "name", spec.Name, "err", err)
		if err := l.Host.Tell(parent.ID(), notice.SpawnFailed(spec.Name, err)); err != nil {
			l.Log.Error("reporting a failed spawn", "parent", parent.ID(), "err", err)
		}
		return
	}
	ch, err := l.Host.Lookup(id)
	if err != nil || l.NoWake {
		return
	}
	ch.Bootstrap()
}

// Respawn creates the child a recorded spawn_agent call of parent
// accepted (recovery: the crash came before the child's creation).
func (l Lifecycle) Respawn(parent Agent, sp fold.Spawn) {
	var args map[string]any
	e, err := l.Host.ReadSeq(context.Background(), parent.ID(), sp.Ref.Seq, sp.Ref.Off)
	if err == nil {
		var d struct {
			Args json.RawMessage `json:"args"`
		}
		if err = json.Unmarshal(e.Data, &d); err == nil {
			err = json.Unmarshal(d.Args, &args)
		}
	}
	if err != nil {
		l.Log.Error("a recorded spawn_agent call is malformed", "parent", parent.ID(), "err", err)
		return
	}
	parsed, err := tools.Parse("spawn_agent", args)
	v, okp := parsed.(tools.SpawnAgent)
	if err != nil || !okp {
		l.Log.Error("a recorded spawn_agent call is malformed", "parent", parent.ID(), "err", err)
		return
	}
	l.Spawn(parent, ChildSpec(parent.ID(), parent.Inherit(), sp.ChildID, v))
}

// ChildSpec is the Spec of child id spawned by parentID with the call v:
// it inherits the parent's provider and model unless the call names them,
// and the parent's working directory.
func ChildSpec(parentID string, in Inherited, id string, v tools.SpawnAgent) Spec {
	prov, model := in.Provider, in.Model
	if v.Provider != "" && v.Provider != prov {
		prov, model = v.Provider, ""
	}
	if v.Model != "" {
		model = v.Model
	}
	return Spec{ID: id, Name: v.Name, ParentID: parentID, Instructions: v.Instructions,
		Provider: prov, Model: model, Metadata: v.Metadata, Cwd: in.Cwd}
}

// Redo redoes the lifecycle effects of a call of a that a re-run turn
// answers from the log: a spawn whose child does not exist is queued
// again, a completion is marked again. result is the call's recorded
// result.
func (l Lifecycle) Redo(a Agent, tool string, args map[string]any, result json.RawMessage) {
	switch tool {
	case "spawn_agent":
		var res struct {
			AgentID string `json:"agent_id"`
		}
		_ = json.Unmarshal(result, &res)
		id := res.AgentID
		if _, err := l.Host.Lookup(id); id != "" && err != nil {
			parsed, err := tools.Parse(tool, args)
			if v, okp := parsed.(tools.SpawnAgent); err == nil && okp {
				l.Defer(a, ChildSpec(a.ID(), a.Inherit(), id, v))
			}
		}
	case "complete":
		l.Complete(a)
	}
}

// Complete terminates a after its current turn, or now when it runs none
// (the complete tool).
func (l Lifecycle) Complete(a Agent) {
	if a.Completing() {
		return
	}
	if err := l.End(a); err != nil {
		l.Log.Error("terminating a completed agent", "agent", a.ID(), "err", err)
	}
}
