package lifecycle

import "github.com/warren-dev/warren/tools"

// The tools' side of spawning and completion (spawn_agent and complete,
// through the engine's toolexec.Env): each names its agent by id, and an
// agent that is gone is nothing to act on.

// ChildOf is ChildSpec for the parent named parentID; a parent that is
// gone passes nothing on (the call's own provider, model and no working
// directory).
func (l Lifecycle) ChildOf(parentID, id string, v tools.SpawnAgent) Spec {
	var in Inherited
	if p, err := l.Host.Lookup(parentID); err == nil {
		in = p.Inherit()
	}
	return ChildSpec(parentID, in, id, v)
}

// CheckChild checks a child's spec as spawn_agent does before it accepts
// the call, in this order: its instructions and metadata against the
// limits, its model (filled in from the provider entry's default), its
// provider, and the provider serving the model.
func (l Lifecycle) CheckChild(spec *Spec) error {
	h := l.Host
	if err := h.CheckText(spec.Instructions, spec.Metadata); err != nil {
		return err
	}
	if err := h.CheckModel(spec.Provider, &spec.Model); err != nil {
		return err
	}
	prov, err := h.Provider(spec.Provider)
	if err != nil {
		return err
	}
	return h.Served(prov, spec.Provider, spec.Model)
}

// CreateChild creates a child now (its parent runs no turn) and starts
// its bootstrap turn, unless NoWake.
func (l Lifecycle) CreateChild(spec Spec) error {
	if _, err := l.Create(l.Ctx, spec); err != nil {
		return err
	}
	if ch, err := l.Host.Lookup(spec.ID); err == nil && !l.NoWake {
		ch.Bootstrap()
	}
	return nil
}

// DeferSpawn is Defer for the parent named parentID; false when it is
// gone.
func (l Lifecycle) DeferSpawn(parentID string, spec Spec) bool {
	p, err := l.Host.Lookup(parentID)
	if err != nil {
		return false
	}
	return l.Defer(p, spec)
}

// MarkCompleting is Complete for the agent named id; nothing when it is
// gone.
func (l Lifecycle) MarkCompleting(id string) {
	if a, err := l.Host.Lookup(id); err == nil {
		l.Complete(a)
	}
}
