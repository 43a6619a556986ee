// Package gate changes an agent's gate (the tools gate_agent,
// ungate_agent and permit_turn, SPEC 6). A gated agent takes no turn on
// its own: its messages wait until it is ungated or permitted one turn.
// The gate is durable (tool.gate in the child's log, folded into its
// projection); the permit is not (a restart withdraws it) and the turn
// it lets start consumes it (the engine's wake and a child's bootstrap
// turn).
//
// The rules: a gate change is logged before it takes effect and
// withdraws any permit; ungating wakes the agent (it may have messages
// waiting), gating does not stop a turn that runs; a permit is logged
// (tool.permit_turn), granted, and wakes the agent.
//
// No locks of its own; Env's and Agent's methods take the engine's one at
// a time.
package gate

import (
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/toolexec"
)

// Agent is what the gate needs of an agent: the engine's record of it
// (agentrec.Agent), each method taking its lock itself.
type Agent interface {
	// Append logs one entry in its log (store.Log's Append).
	Append(event string, data any) (eventlog.Entry, error)
	// SetPermit grants or withdraws its permit of one turn.
	SetPermit(permit bool)
}

// Env is what the gate needs of the engine, for agents of type A.
type Env[A Agent] interface {
	// Agent returns a live agent.
	Agent(id string) (A, bool)
	// Wake starts a turn for a if it has work and may take one.
	Wake(a A)
}

// Set gates (gated) or ungates agent id; name is the agent as the caller
// named it, which the log records. id must be a live agent
// (toolexec.ErrNoAgent).
func Set[A Agent](env Env[A], id, name string, gated bool) error {
	a, ok := env.Agent(id)
	if !ok {
		return toolexec.ErrNoAgent
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
		env.Wake(a)
	}
	return nil
}

// Permit lets agent id take one turn while gated.
func Permit[A Agent](env Env[A], id, name string) error {
	a, ok := env.Agent(id)
	if !ok {
		return toolexec.ErrNoAgent
	}
	if _, err := a.Append(schema.ToolPermitTurn, schema.GateData{AgentName: name}); err != nil {
		return err
	}
	a.SetPermit(true)
	env.Wake(a)
	return nil
}
