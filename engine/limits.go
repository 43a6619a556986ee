package engine

import (
	"github.com/warren-dev/warren/config"
	"github.com/warren-dev/warren/engine/internal/limits"
	"github.com/warren-dev/warren/inbox"
)

// Memory bounded by design (docs/DECISIONS.md): a pending message keeps its
// envelope in memory and, above residentPayload bytes, not its payload,
// which is read back from the recipient's log (inbox.Message.Ref) when a
// turn, check_inbox or inspect shows it. The pending messages are bounded
// per agent and in total, in count and bytes (config.Limits).

// pageBytes bounds the payload bytes one reply or one wake prompt carries
// (at least one message is always shown), so that a reply stays well inside
// the 16 MiB frame whatever the limits are.
const pageBytes = 4 << 20

// Page sizes of agent.log and agent.inspect's inbox when the client gives
// no limit, and the largest limit it may ask for.
const (
	DefaultPageLimit = 200
	MaxPageLimit     = 10_000
)

// limits returns the limits in force: the config's, with the defaults
// for those it leaves unset.
func (c *Core) limits() config.Limits { return limits.Effective(c.config().Limits) }

// checkRoom says whether an inbox holding n messages of b payload bytes
// takes one more of size bytes, under the per-inbox and the total limits,
// with tn messages of tb bytes reserved beyond the daemon's totals (sends
// in flight, reserve.go); the error wraps errInboxFull and says which limit
// and what to do.
func (c *Core) checkRoom(owner string, n int, b int64, size int, tn, tb int64) error {
	l := c.limits()
	who := c.displayName(owner)
	count, bytes := c.pending.Count()+tn, c.pending.Bytes()+tb
	return limits.CheckRoom(l, who, n, b, size, count, bytes)
}

// fillPayloads returns msgs with every payload resident, reading those
// that are not back from the owner's log.
func (c *Core) fillPayloads(owner string, msgs []inbox.Message) ([]inbox.Message, error) {
	return limits.FillPayloads(c.st.ReadSeq, owner, msgs)
}

// checkAgentText checks an agent's instructions and metadata against the
// message limit (limits.CheckAgentText).
func (c *Core) checkAgentText(instructions string, md map[string]string) error {
	return limits.CheckAgentText(c.limits().MessageBytes, instructions, md)
}
