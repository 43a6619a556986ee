package toolexec

import (
	"fmt"
	"maps"

	"github.com/warren-dev/warren/tools"
	"github.com/warren-dev/warren/tree"
)

// child resolves a direct child of the caller by name; "" and the reason
// when there is none.
func (x exec) child(name string) (Agent, string) {
	id, err := x.env.ChildByName(x.self, name)
	if err != nil {
		return Agent{}, err.Error()
	}
	ch, ok := x.env.Agent(id)
	if !ok {
		return Agent{}, fmt.Sprintf("no child agent named %q", name)
	}
	return ch, ""
}

func (x exec) spawn(v tools.SpawnAgent) (Outcome, error) {
	if err := tree.ValidateName(v.Name); err != nil {
		return failed("%v", err), nil
	}
	if _, err := x.env.ChildByName(x.self, v.Name); err == nil {
		return failed("agent name taken: %s already has a child named %q", x.env.DisplayName(x.self), v.Name), nil
	}
	if self, _ := x.env.Agent(x.self); v.Name == self.Name {
		return failed("agent name taken: a child may not have its parent's name %q", v.Name), nil
	}
	if v.Provider != "" {
		if err := x.env.CheckProvider(v.Provider); err != nil {
			return failed("%v", err), nil
		}
	}
	spec := x.env.ChildSpec(x.self, x.derivedID("spawn", v.Name), v)
	if err := x.env.CheckChild(&spec); err != nil {
		return failed("%v", err), nil
	}
	if x.pos.RunID == "" {
		// Outside a turn (the tool.call method) the child is created before
		// the call is answered: the acknowledgement means it exists.
		if err := x.env.CreateChild(spec); err != nil {
			return failed("spawning %q failed: %v", v.Name, err), nil
		}
		return done(tools.SpawnAgentResult(spec.ID, v.Name)), nil
	}
	if !x.env.DeferSpawn(x.self, spec) {
		return failed("agent name taken: %q is already being spawned in this turn", v.Name), nil
	}
	return done(tools.SpawnAgentResult(spec.ID, v.Name)), nil
}

// info describes a child in results.
func info(a Agent) tools.AgentInfo {
	return tools.AgentInfo{Name: a.Name, AgentID: a.ID, State: a.State, Gated: a.Gated, Metadata: a.Metadata,
		PendingMessages: a.Pending}
}

func (x exec) inspect(v tools.InspectAgent) (Outcome, error) {
	ch, e := x.child(v.Name)
	if e != "" {
		return failed("%s", e), nil
	}
	lim := x.env.Limits()
	msgs, err := x.env.FillPayloads(ch.ID, x.env.PendingFirst(ch.ID, lim.RecentCount, lim.RecentBytes))
	if err != nil {
		return Outcome{}, err
	}
	in := info(ch)
	in.RecentMessages = x.items(msgs)
	return done(tools.InspectAgentResult(in)), nil
}

func (x exec) poke(v tools.Poke) (Outcome, error) {
	ch, e := x.child(v.AgentName)
	if e != "" {
		return failed("%s", e), nil
	}
	x.env.Poke(ch.ID)
	return done(tools.PokeResult(ch.ID)), nil
}

func (x exec) listChildren() (Outcome, error) {
	var list []tools.AgentInfo
	for _, id := range x.env.Children(x.self) {
		if ch, ok := x.env.Agent(id); ok {
			list = append(list, info(ch))
		}
	}
	return done(tools.ListChildrenResult(list)), nil
}

func (x exec) setMetadata(v tools.SetAgentMetadata) (Outcome, error) {
	ch, e := x.child(v.AgentName)
	if e != "" {
		return failed("%s", e), nil
	}
	if v.Value != nil {
		md := maps.Clone(ch.Metadata)
		if md == nil {
			md = map[string]string{}
		}
		md[v.Key] = *v.Value
		if err := x.env.CheckMetadata(md); err != nil {
			return failed("%v", err), nil
		}
	}
	if err := x.env.SetMetadata(ch.ID, v.Key, v.Value); err != nil {
		return Outcome{}, fmt.Errorf("logging metadata.updated: %w", err)
	}
	return done(tools.SetAgentMetadataResult(v.AgentName, v.Key, v.Value)), nil
}

func (x exec) gate(name string, gate bool) (Outcome, error) {
	ch, e := x.child(name)
	if e != "" {
		return failed("%s", e), nil
	}
	if err := x.env.SetGate(ch.ID, name, gate); err != nil {
		return Outcome{}, fmt.Errorf("logging tool.gate: %w", err)
	}
	if gate {
		return done(tools.GateResult(name)), nil
	}
	return done(tools.UngateResult(name)), nil
}

func (x exec) permit(v tools.PermitTurn) (Outcome, error) {
	ch, e := x.child(v.AgentName)
	if e != "" {
		return failed("%s", e), nil
	}
	if !ch.Gated {
		return failed("agent is not gated"), nil
	}
	if ch.Busy {
		return failed("agent is not idle"), nil
	}
	if err := x.env.PermitTurn(ch.ID, v.AgentName); err != nil {
		return Outcome{}, fmt.Errorf("logging tool.permit_turn: %w", err)
	}
	return done(tools.PermitTurnResult(v.AgentName)), nil
}
