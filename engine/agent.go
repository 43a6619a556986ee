package engine

import (
	"github.com/warren-dev/warren/engine/internal/agentrec"
	fold "github.com/warren-dev/warren/projection"
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

// The agent's durable state is folded by package projection (no locks, no
// I/O); the daemon holds one per agent under the agent's lock. Short names
// for its types inside the daemon:
type (
	projection      = fold.State
	recordedCall    = fold.Call
	sentRef         = fold.SentRef
	subscriptionRec = fold.Subscription
)

// residentPayload is the largest payload a pending message keeps in memory.
const residentPayload = fold.ResidentPayload

func newProjection() *projection { return fold.New() }
