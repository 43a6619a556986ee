package engine

import (
	"context"
	"fmt"
	"github.com/warren-dev/warren/eventlog"

	"github.com/warren-dev/warren/config"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/schema"
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
func (c *Core) limits() config.Limits { return c.config().Limits.WithDefaults() }

// checkRoom says whether an inbox holding n messages of b payload bytes
// takes one more of size bytes, under the per-inbox and the total limits,
// with tn messages of tb bytes reserved beyond the daemon's totals (sends
// in flight, reserve.go); the error wraps errInboxFull and says which limit
// and what to do.
func (c *Core) checkRoom(owner string, n int, b int64, size int, tn, tb int64) error {
	count, bytes := c.pending.Count()+tn, c.pending.Bytes()+tb
	return roomFor(c.limits(), c.displayName(owner), n, b, size, count, bytes)
}

// roomFor says whether the inbox of who, holding n messages of b payload
// bytes, takes one more of size bytes, under the per-inbox limits and,
// with the daemon holding count messages of bytes in all (sends in flight
// included), the total ones; the error wraps errInboxFull and says which
// limit and what to do.
func roomFor(l config.Limits, who string, n int, b int64, size int, count, bytes int64) error {
	switch {
	case n+1 > l.InboxMessages:
		return fmt.Errorf("the inbox of %s holds %d pending messages (counting sends in flight), its limit (limits.inbox_messages): %w; wait for it to catch up", who, n, errInboxFull)
	case b+int64(size) > l.InboxBytes:
		return fmt.Errorf("the inbox of %s holds %d bytes of pending messages (counting sends in flight) and this one is %d bytes; the limit is %d (limits.inbox_bytes): %w; wait for it to catch up",
			who, b, size, l.InboxBytes, errInboxFull)
	case count+1 > int64(l.PendingMessages):
		return fmt.Errorf("the daemon holds %d pending messages (counting sends in flight), its limit (limits.pending_messages): %w; wait for agents to catch up", count, errInboxFull)
	case bytes+int64(size) > l.PendingBytes:
		return fmt.Errorf("the daemon holds %d bytes of pending messages (counting sends in flight) and this one is %d bytes; the limit is %d (limits.pending_bytes): %w; wait for agents to catch up",
			bytes, size, l.PendingBytes, errInboxFull)
	}
	return nil
}

// checkAgentText checks an agent's instructions and metadata against the
// message limit: the instructions, and the metadata's keys and values
// together, are at most that many bytes each (they are logged in
// agent.created and shown in every inspect, like a message).
func (c *Core) checkAgentText(instructions string, md map[string]string) error {
	limit := c.limits().MessageBytes
	if len(instructions) > limit {
		return fmt.Errorf("instructions are %d bytes, over the %d-byte limit (limits.message_bytes); shorten them", len(instructions), limit)
	}
	n := 0
	for k, v := range md {
		n += len(k) + len(v)
	}
	if n > limit {
		return fmt.Errorf("metadata is %d bytes (keys and values), over the %d-byte limit (limits.message_bytes); store less", n, limit)
	}
	return nil
}

// fillPayloads returns msgs with every payload resident, reading those
// that are not back from the owner's log through one handle (with the
// envelope the log holds, not the one held without the payload: a
// checkpoint's, until the scrub has compared it with the log).
func (c *Core) fillPayloads(ctx context.Context, owner string, msgs []inbox.Message) ([]inbox.Message, error) {
	out := make([]inbox.Message, len(msgs))
	var at []eventlog.At
	var idx []int
	for i, m := range msgs {
		if !m.Spilled() {
			out[i] = m
			continue
		}
		at = append(at, eventlog.At{Seq: m.Ref.Seq, Off: max(m.Ref.Off, 0)})
		idx = append(idx, i)
	}
	if len(at) == 0 {
		return out, nil
	}
	err := c.st.ReadSeqs(ctx, owner, at, func(j int, e eventlog.Entry) error {
		m := msgs[idx[j]]
		full, err := messageOf(owner, e)
		if err != nil {
			return err
		}
		if full.ID != m.ID {
			return fmt.Errorf("the log of %s has message %s at seq %d, not %s", owner, full.ID, m.Ref.Seq, m.ID)
		}
		full.Ref = m.Ref
		out[idx[j]] = full
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading pending messages of %s back from its log: %w", owner, err)
	}
	return out, nil
}

// messageOf is the message of a message.enqueued entry of owner's log.
func messageOf(owner string, e eventlog.Entry) (inbox.Message, error) {
	if e.Event != schema.MessageEnqueued {
		return inbox.Message{}, fmt.Errorf("the log of %s has %s at seq %d, not a message", owner, e.Event, e.Seq)
	}
	m, err := inbox.FromEventData(e.Data)
	if err != nil {
		return inbox.Message{}, fmt.Errorf("the log of %s at seq %d: %w", owner, e.Seq, err)
	}
	return m, nil
}

// checkDepth refuses a new agent under parentID that would make the tree
// deeper than limits.tree_depth (a root is at depth 1).
func (c *Core) checkDepth(parentID string) error {
	if parentID == "" {
		return nil
	}
	limit := c.limits().TreeDepth
	depth := 1
	for id := parentID; id != ""; depth++ {
		p, ok := c.tree.Parent(id)
		if !ok {
			break
		}
		id = p
	}
	if depth > limit {
		return fmt.Errorf("the tree would be %d deep; its limit is %d (limits.tree_depth): spawn from an agent nearer the root, or raise the limit", depth, limit)
	}
	return nil
}
