package engine

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/warren-dev/warren/toolexec"
)

// The tools run in package toolexec against the Core as their environment
// (toolenv.go). runTools is the ToolCaller of one attempt of a turn: the
// attempt's toolexec.Attempt, which providers call, plus the calls that
// join it over the socket with the agent's credential (agentauth.go).
type runTools struct {
	toolexec.Attempt
	ext extCalls
}

// derivedNoticeID is the id of a message SYSTEM sends about an event named
// by parts: the same event always gets the same id.
func derivedNoticeID(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}
