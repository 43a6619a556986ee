package engine

import (
	"github.com/warren-dev/warren/engine/internal/agentrec"
	"github.com/warren-dev/warren/store"
)

// agent is one live agent: its record (package agentrec) holds its log,
// the projection folded from it and the state of this process, under a
// lock of its own that only the record's methods take.
type agent = agentrec.Agent

// runTools is the ToolCaller of one attempt of a turn (agentrec.Tools):
// the attempt's toolexec.Attempt, which providers call, plus the calls
// that join it over the socket with the agent's credential (agentauth.go).
type runTools = agentrec.Tools

func newAgent(id string, log store.Log, p *projection) *agent { return agentrec.New(id, log, p) }
