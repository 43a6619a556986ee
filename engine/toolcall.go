package engine

import (
	"github.com/warren-dev/warren/engine/internal/extcall"
	"github.com/warren-dev/warren/toolexec"
)

// The tools run in package toolexec against the Core as their environment
// (toolenv.go). runTools is the ToolCaller of one attempt of a turn: the
// attempt's toolexec.Attempt, which providers call, plus the calls that
// join it over the socket with the agent's credential (agentauth.go).
type runTools struct {
	toolexec.Attempt
	door extcall.Door
}
