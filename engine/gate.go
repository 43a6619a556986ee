package engine

import "github.com/warren-dev/warren/schema"

// An agent's gate (the tools gate_agent, ungate_agent and permit_turn,
// SPEC 6). A gated agent takes no turn on its own: its messages wait
// until it is ungated or permitted one turn. The gate is durable
// (tool.gate in the child's log, folded into its projection); the permit
// is not (a restart withdraws it) and the turn it lets start consumes it
// (the wake and a child's bootstrap turn).
//
// A gate change is logged before it takes effect and withdraws any
// permit; ungating wakes the agent (it may have messages waiting), gating
// does not stop a turn that runs; a permit is logged (tool.permit_turn),
// granted, and wakes the agent.

// setGate gates (gated) or ungates agent id; name is the agent as the
// caller named it, which the log records. id must be a live agent
// (errNotFoundAgent).
func (c *Core) setGate(id, name string, gated bool) error {
	a, ok := c.agent(id)
	if !ok {
		return errNotFoundAgent
	}
	action := "ungate"
	if gated {
		action = "gate"
	}
	if _, err := a.Append(schema.ToolGate, schema.GateData{Action: action, AgentName: name}); err != nil {
		return err
	}
	a.SetPermit(false)
	if !gated {
		c.wake(a)
	}
	return nil
}

// permitTurn lets agent id take one turn while gated.
func (c *Core) permitTurn(id, name string) error {
	a, ok := c.agent(id)
	if !ok {
		return errNotFoundAgent
	}
	if _, err := a.Append(schema.ToolPermitTurn, schema.GateData{AgentName: name}); err != nil {
		return err
	}
	a.SetPermit(true)
	c.wake(a)
	return nil
}
