package engine

import (
	"errors"
	"fmt"
	"github.com/warren-dev/warren/inbox"
	"maps"

	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/tools"
	"github.com/warren-dev/warren/tree"
)

// The tools a parent uses on its children: spawn_agent, inspect_agent,
// poke, list_children, set_agent_metadata, gate, ungate and permit_turn.

// child resolves a direct child of the caller by name; the reason when
// there is none.
func (x toolExec) child(name string) (toolAgent, string) {
	id, err := x.c.tree.ChildByName(x.self, name)
	if err != nil {
		return toolAgent{}, err.Error()
	}
	ch, ok := x.c.toolView(id)
	if !ok {
		return toolAgent{}, fmt.Sprintf("no child agent named %q", name)
	}
	return ch, ""
}

func (x toolExec) spawn(v tools.SpawnAgent) (toolOutcome, error) {
	if err := tree.ValidateName(v.Name); err != nil {
		return toolFailed("%v", err), nil
	}
	if _, err := x.c.tree.ChildByName(x.self, v.Name); err == nil {
		return toolFailed("agent name taken: %s already has a child named %q", x.c.displayName(x.self), v.Name), nil
	}
	if self, _ := x.c.toolView(x.self); v.Name == self.Name {
		return toolFailed("agent name taken: a child may not have its parent's name %q", v.Name), nil
	}
	if v.Provider != "" {
		if _, err := x.c.provider(v.Provider); err != nil {
			return toolFailed("%v", err), nil
		}
	}
	spec := x.c.childOf(x.self, x.derivedID("spawn", v.Name), v)
	if err := x.c.checkChild(&spec); err != nil {
		return toolFailed("%v", err), nil
	}
	if why := x.c.grant(x.self, &spec); why != "" {
		return toolFailed("%s", why), nil
	}
	if x.pos.RunID == "" {
		// Outside a turn (the tool.call method) the child is created before
		// the call is answered: the acknowledgement means it exists.
		if err := x.c.createChild(spec); err != nil {
			return toolFailed("spawning %q failed: %v", v.Name, err), nil
		}
		return toolDone(tools.SpawnAgentResult(spec.ID, v.Name)), nil
	}
	if !x.c.deferSpawnOf(x.self, spec) {
		return toolFailed("agent name taken: %q is already being spawned in this turn", v.Name), nil
	}
	return toolDone(tools.SpawnAgentResult(spec.ID, v.Name)), nil
}

// agentInfo describes a child in results.
func agentInfo(a toolAgent) tools.AgentInfo {
	return tools.AgentInfo{Name: a.Name, AgentID: a.ID, State: a.State, Gated: a.Gated, Metadata: a.Metadata,
		PendingMessages: a.Pending}
}

func (x toolExec) inspect(v tools.InspectAgent) (toolOutcome, error) {
	ch, e := x.child(v.Name)
	if e != "" {
		return toolFailed("%s", e), nil
	}
	var first []inbox.Message
	if a, ok := x.c.agent(ch.ID); ok {
		first = a.PendingFirst(recentCount, recentBytes)
	}
	msgs, err := x.c.fillPayloads(x.ctx, ch.ID, first)
	if err != nil {
		return toolOutcome{}, err
	}
	in := agentInfo(ch)
	in.RecentMessages = x.items(msgs)
	return toolDone(tools.InspectAgentResult(in)), nil
}

func (x toolExec) poke(v tools.Poke) (toolOutcome, error) {
	ch, e := x.child(v.AgentName)
	if e != "" {
		return toolFailed("%s", e), nil
	}
	if a, ok := x.c.agent(ch.ID); ok {
		x.c.poke(a)
	}
	return toolDone(tools.PokeResult(ch.ID)), nil
}

// mergeChild merges a child's branch (a live child, or one that
// completed) into the caller's workspace.
func (x toolExec) mergeChild(v tools.MergeChild) (toolOutcome, error) {
	id, e := x.childAnyState(v.AgentName)
	if e != "" {
		return toolFailed("%s", e), nil
	}
	res, err := x.c.MergeChild(x.ctx, id)
	if err != nil {
		var de *domainError
		if errors.As(err, &de) {
			return toolFailed("%v", err), nil // a refusal or conflicts: the agent reads them
		}
		return toolOutcome{}, err
	}
	return toolDone(map[string]any{"merged": v.AgentName, "branch": res.Branch, "commit": res.Commit}), nil
}

// childAnyState resolves a child of the caller by name, live or
// terminated; the reason when there is none.
func (x toolExec) childAnyState(name string) (string, string) {
	if id, err := x.c.tree.ChildByName(x.self, name); err == nil {
		return id, ""
	}
	if id := x.c.agents.GoneChild(x.self, name); id != "" {
		return id, ""
	}
	return "", fmt.Sprintf("no child agent named %q", name)
}

func (x toolExec) listChildren() (toolOutcome, error) {
	var list []tools.AgentInfo
	for _, id := range x.c.tree.Children(x.self) {
		if ch, ok := x.c.toolView(id); ok {
			list = append(list, agentInfo(ch))
		}
	}
	return toolDone(tools.ListChildrenResult(list)), nil
}

func (x toolExec) setMetadata(v tools.SetAgentMetadata) (toolOutcome, error) {
	ch, e := x.child(v.AgentName)
	if e != "" {
		return toolFailed("%s", e), nil
	}
	if v.Value != nil {
		md := maps.Clone(ch.Metadata)
		if md == nil {
			md = map[string]string{}
		}
		md[v.Key] = *v.Value
		if err := x.c.checkAgentText("", md); err != nil {
			return toolFailed("%v", err), nil
		}
	}
	a, ok := x.c.agent(ch.ID)
	if !ok {
		return toolFailed("no child agent named %q", v.AgentName), nil
	}
	if _, err := a.Append(schema.MetadataUpdated, schema.MetadataUpdatedData{Key: v.Key, Value: v.Value}); err != nil {
		return toolOutcome{}, fmt.Errorf("logging metadata.updated: %w", err)
	}
	return toolDone(tools.SetAgentMetadataResult(v.AgentName, v.Key, v.Value)), nil
}

func (x toolExec) gate(name string, gate bool) (toolOutcome, error) {
	ch, e := x.child(name)
	if e != "" {
		return toolFailed("%s", e), nil
	}
	if err := x.c.setGate(ch.ID, name, gate); err != nil {
		return toolOutcome{}, fmt.Errorf("logging tool.gate: %w", err)
	}
	if gate {
		return toolDone(tools.GateResult(name)), nil
	}
	return toolDone(tools.UngateResult(name)), nil
}

func (x toolExec) permit(v tools.PermitTurn) (toolOutcome, error) {
	ch, e := x.child(v.AgentName)
	if e != "" {
		return toolFailed("%s", e), nil
	}
	if !ch.Gated {
		return toolFailed("agent is not gated"), nil
	}
	if ch.Busy {
		return toolFailed("agent is not idle"), nil
	}
	if err := x.c.permitTurn(ch.ID, v.AgentName); err != nil {
		return toolOutcome{}, fmt.Errorf("logging tool.permit_turn: %w", err)
	}
	return toolDone(tools.PermitTurnResult(v.AgentName)), nil
}
