package config

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Limits bounds what clients and agents can make the daemon hold: the size
// of one message (and of instructions and metadata values, which match it),
// and the pending messages per agent and in total, in count and bytes. The
// "limits" object of config.json sets them; each key is optional.
type Limits struct {
	// MessageBytes bounds a message, a tool text, an agent's instructions
	// and a metadata value ("message_bytes").
	MessageBytes int
	// InboxMessages and InboxBytes bound one agent's pending messages
	// ("inbox_messages", "inbox_bytes").
	InboxMessages int
	InboxBytes    int64
	// PendingMessages and PendingBytes bound the pending messages of every
	// agent together ("pending_messages", "pending_bytes").
	PendingMessages int
	PendingBytes    int64
	// TurnTranscriptBytes bounds the messages of one turn in progress of
	// an HTTP provider (the model's text, tool calls and tool results,
	// sent again with every model step) ("turn_transcript_bytes").
	TurnTranscriptBytes int
	// TreeDepth bounds how deep the agent tree grows: a root is at depth
	// 1, and a create or spawn_agent that would place an agent deeper is
	// refused ("tree_depth"). Paths, listings and their replies stay
	// bounded with it.
	TreeDepth int
}

// Default limits (docs/DECISIONS.md, "Memory bounded by design").
const (
	DefaultMessageBytes    = 1 << 20
	DefaultInboxMessages   = 10_000
	DefaultInboxBytes      = 256 << 20
	DefaultPendingMessages = 200_000
	DefaultPendingBytes    = 4 << 30
	// DefaultTurnTranscriptBytes keeps one hostile or runaway turn, with
	// the request it sends, well inside the daemon's memory class.
	DefaultTurnTranscriptBytes = 32 << 20
	// DefaultTreeDepth is deep enough for any team we have seen (a lead,
	// its workers and theirs) and keeps a path, at 64 bytes a name, under
	// 4 KiB.
	DefaultTreeDepth = 64
)

// Bounds on the limits themselves. MaxMessageBytes keeps a message, with
// its envelope, well inside one 16 MiB socket frame and one log line.
const (
	MaxMessageBytes  = 8 << 20
	maxInboxMessages = 10_000_000
	maxPendingBytes  = 1 << 50
	// maxTurnTranscriptBytes: a turn's messages are held and sent again
	// at every step; past 1 GiB no model's context takes them anyway.
	maxTurnTranscriptBytes = 1 << 30
	// maxTreeDepth: a deeper tree makes every listing quadratic in it.
	maxTreeDepth = 1024
)

var limitKeys = []string{"message_bytes", "inbox_messages", "inbox_bytes", "pending_messages", "pending_bytes", "turn_transcript_bytes", "tree_depth"}

// DefaultLimits returns the built-in limits.
func DefaultLimits() Limits {
	return Limits{MessageBytes: DefaultMessageBytes, InboxMessages: DefaultInboxMessages, InboxBytes: DefaultInboxBytes,
		PendingMessages: DefaultPendingMessages, PendingBytes: DefaultPendingBytes, TurnTranscriptBytes: DefaultTurnTranscriptBytes,
		TreeDepth: DefaultTreeDepth}
}

// WithDefaults returns l with the built-in value of every limit it leaves
// unset (0).
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits()
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
	if l.TurnTranscriptBytes <= 0 {
		l.TurnTranscriptBytes = d.TurnTranscriptBytes
	}
	if l.TreeDepth <= 0 {
		l.TreeDepth = d.TreeDepth
	}
	return l
}

// parseLimits merges the "limits" object over l.
func parseLimits(l Limits, raw json.RawMessage) (Limits, error) {
	obj, err := decodeObject(raw, `"limits"`)
	if err != nil {
		return l, err
	}
	for _, k := range sortedKeys(obj) {
		if !contains(limitKeys, k) {
			return l, fmt.Errorf("%w: unknown key %q%s; the keys of \"limits\" are %s", ErrInvalid, "limits."+k, suggestKey(k, limitKeys), strings.Join(limitKeys, ", "))
		}
		key := "limits." + k
		switch k {
		case "message_bytes":
			n, err := intValue(key, obj[k], 1, MaxMessageBytes)
			if err != nil {
				return l, err
			}
			l.MessageBytes = int(n)
		case "inbox_messages":
			n, err := intValue(key, obj[k], 1, maxInboxMessages)
			if err != nil {
				return l, err
			}
			l.InboxMessages = int(n)
		case "inbox_bytes":
			n, err := intValue(key, obj[k], 1, maxPendingBytes)
			if err != nil {
				return l, err
			}
			l.InboxBytes = n
		case "pending_messages":
			n, err := intValue(key, obj[k], 1, maxInboxMessages)
			if err != nil {
				return l, err
			}
			l.PendingMessages = int(n)
		case "pending_bytes":
			n, err := intValue(key, obj[k], 1, maxPendingBytes)
			if err != nil {
				return l, err
			}
			l.PendingBytes = n
		case "turn_transcript_bytes":
			n, err := intValue(key, obj[k], 1, maxTurnTranscriptBytes)
			if err != nil {
				return l, err
			}
			l.TurnTranscriptBytes = int(n)
		case "tree_depth":
			n, err := intValue(key, obj[k], 1, maxTreeDepth)
			if err != nil {
				return l, err
			}
			l.TreeDepth = int(n)
		}
	}
	return l, nil
}

func (l Limits) marshalMap() map[string]int64 {
	return map[string]int64{"message_bytes": int64(l.MessageBytes), "inbox_messages": int64(l.InboxMessages),
		"inbox_bytes": l.InboxBytes, "pending_messages": int64(l.PendingMessages), "pending_bytes": l.PendingBytes,
		"turn_transcript_bytes": int64(l.TurnTranscriptBytes), "tree_depth": int64(l.TreeDepth)}
}
