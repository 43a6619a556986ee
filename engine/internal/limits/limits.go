// Package limits applies the message and inbox limits (config.Limits,
// docs/DECISIONS.md "Memory bounded by design"): the limits in force, the
// check that an inbox takes one more message (per inbox and in total), the
// check of an agent's instructions and metadata against the message
// limit, and the reading back of pending payloads that stay in the log (a
// pending message over the residency threshold keeps its envelope in
// memory and its place in the log, inbox.Ref, not its payload).
//
// Pure functions and values; what they need from the engine (the counts,
// the reader of a log line) is passed in. No locks.
package limits

import (
	"context"
	"fmt"

	"github.com/warren-dev/warren/config"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/toolexec"
)

// Effective returns the limits in force: cfg's, with the defaults for
// those it leaves unset.
func Effective(cfg config.Limits) config.Limits {
	l := cfg
	d := config.DefaultLimits()
	if l.MessageBytes <= 0 {
		l.MessageBytes = d.MessageBytes
	}
	if l.InboxMessages <= 0 {
		l.InboxMessages = d.InboxMessages
	}
	if l.InboxBytes <= 0 {
		l.InboxBytes = d.InboxBytes
	}
	if l.PendingMessages <= 0 {
		l.PendingMessages = d.PendingMessages
	}
	if l.PendingBytes <= 0 {
		l.PendingBytes = d.PendingBytes
	}
	return l
}

// CheckRoom says whether the inbox of who, holding n messages of b payload
// bytes, takes one more of size bytes, under the per-inbox limits and,
// with the daemon holding count messages of bytes in all (sends in flight
// included), the total ones; the error wraps toolexec.ErrInboxFull and
// says which limit and what to do.
func CheckRoom(l config.Limits, who string, n int, b int64, size int, count, bytes int64) error {
	switch {
	case n+1 > l.InboxMessages:
		return fmt.Errorf("the inbox of %s holds %d pending messages (counting sends in flight), its limit (limits.inbox_messages): %w; wait for it to catch up", who, n, toolexec.ErrInboxFull)
	case b+int64(size) > l.InboxBytes:
		return fmt.Errorf("the inbox of %s holds %d bytes of pending messages (counting sends in flight) and this one is %d bytes; the limit is %d (limits.inbox_bytes): %w; wait for it to catch up",
			who, b, size, l.InboxBytes, toolexec.ErrInboxFull)
	case count+1 > int64(l.PendingMessages):
		return fmt.Errorf("the daemon holds %d pending messages (counting sends in flight), its limit (limits.pending_messages): %w; wait for agents to catch up", count, toolexec.ErrInboxFull)
	case bytes+int64(size) > l.PendingBytes:
		return fmt.Errorf("the daemon holds %d bytes of pending messages (counting sends in flight) and this one is %d bytes; the limit is %d (limits.pending_bytes): %w; wait for agents to catch up",
			bytes, size, l.PendingBytes, toolexec.ErrInboxFull)
	}
	return nil
}

// CheckAgentText checks an agent's instructions and metadata against the
// message limit: the instructions, and the metadata's keys and values
// together, are at most limit bytes each (they are logged in
// agent.created and shown in every inspect, like a message).
func CheckAgentText(limit int, instructions string, md map[string]string) error {
	if len(instructions) > limit {
		return fmt.Errorf("instructions are %d bytes, over the %d-byte limit (limits.message_bytes); shorten them", len(instructions), limit)
	}
	if n := metadataSize(md); n > limit {
		return fmt.Errorf("metadata is %d bytes (keys and values), over the %d-byte limit (limits.message_bytes); store less", n, limit)
	}
	return nil
}

func metadataSize(md map[string]string) int {
	n := 0
	for k, v := range md {
		n += len(k) + len(v)
	}
	return n
}

// ReadSeq reads one line of an agent's log (store.Store.ReadSeq).
type ReadSeq func(ctx context.Context, id string, seq uint64, hint int64) (eventlog.Entry, error)

// FillPayloads returns msgs with every payload resident, reading those
// that are not back from owner's log.
func FillPayloads(read ReadSeq, owner string, msgs []inbox.Message) ([]inbox.Message, error) {
	out := make([]inbox.Message, len(msgs))
	for i, m := range msgs {
		if !m.Spilled() {
			out[i] = m
			continue
		}
		full, err := ReadMessage(read, owner, m.Ref)
		if err != nil {
			return nil, err
		}
		if full.ID != m.ID {
			return nil, fmt.Errorf("the log of %s has message %s at seq %d, not %s", owner, full.ID, m.Ref.Seq, m.ID)
		}
		out[i] = m.Fill(full.Payload)
	}
	return out, nil
}

// ReadMessage reads one message.enqueued entry back from owner's log.
func ReadMessage(read ReadSeq, owner string, ref inbox.Ref) (inbox.Message, error) {
	e, err := read(context.Background(), owner, ref.Seq, ref.Off)
	if err != nil {
		return inbox.Message{}, fmt.Errorf("reading a pending message of %s back from its log: %w", owner, err)
	}
	if e.Event != schema.MessageEnqueued {
		return inbox.Message{}, fmt.Errorf("the log of %s has %s at seq %d, not a message", owner, e.Event, ref.Seq)
	}
	m, err := inbox.FromEventData(e.Data)
	if err != nil {
		return inbox.Message{}, fmt.Errorf("the log of %s at seq %d: %w", owner, ref.Seq, err)
	}
	return m, nil
}
