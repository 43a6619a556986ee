package inbox

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/warren-dev/warren/internal/textcut"
	"maps"
	"strings"
	"time"

	"github.com/warren-dev/warren/schema"
)

// Sentinel participants, as in package tree.
const (
	User   = "USER"
	System = "SYSTEM"
)

// EventEnqueued is the event that records a message in its recipient's log.
const EventEnqueued = schema.MessageEnqueued

// TimestampFormat is the layout of the timestamp field: RFC 3339, UTC,
// milliseconds.
const TimestampFormat = "2006-01-02T15:04:05.000Z07:00"

// Errors callers test with errors.Is.
var (
	ErrUnknownKind    = errors.New("unknown message kind")
	ErrInvalidMessage = errors.New("invalid message")
	ErrFull           = errors.New("inbox full")
	ErrDuplicate      = errors.New("message already queued")
)

// Kind is a message kind.
type Kind string

// The message kinds.
const (
	KindRequest      Kind = "request"
	KindResponse     Kind = "response"
	KindNotification Kind = "notification"
	KindError        Kind = "error"
)

// Kinds lists the valid kinds in a fixed order.
func Kinds() []Kind {
	return []Kind{KindRequest, KindResponse, KindNotification, KindError}
}

// ParseKind parses a kind name. An unknown name is an error wrapping
// ErrUnknownKind that lists the valid kinds.
func ParseKind(s string) (Kind, error) {
	k := Kind(s)
	if k.Valid() {
		return k, nil
	}
	names := make([]string, 0, 4)
	for _, k := range Kinds() {
		names = append(names, string(k))
	}
	return "", fmt.Errorf("%w %q: use one of %s", ErrUnknownKind, truncate(s, 64), strings.Join(names, ", "))
}

// Valid reports whether k is one of the four kinds.
func (k Kind) Valid() bool {
	switch k {
	case KindRequest, KindResponse, KindNotification, KindError:
		return true
	}
	return false
}

func (k Kind) String() string { return string(k) }

// Message is the envelope of one message.
type Message struct {
	ID        string
	Sender    string // agent id, "USER" or "SYSTEM"
	Recipient string // agent id or "USER"
	Kind      Kind
	Payload   string
	Timestamp time.Time
	ReplyTo   string // "" when not a reply
	Metadata  map[string]string
	// Ref is where the message's message.enqueued entry is in its
	// recipient's log (zero when unknown).
	Ref Ref
	// PayloadSize is set (to the payload's length in bytes) only while the
	// payload is not resident: Spill drops it, and whoever shows the
	// message reads it back from the log at Ref and calls Fill.
	PayloadSize int
}

// Ref locates a message.enqueued entry: its seq and the byte offset of its
// line in the recipient's log (a hint; 0 when unknown).
type Ref struct {
	Seq uint64
	Off int64
}

// Spilled reports whether the payload is not resident (see Spill).
func (m Message) Spilled() bool { return m.PayloadSize > 0 }

// Size is the payload's length in bytes, resident or not.
func (m Message) Size() int {
	if m.Spilled() {
		return m.PayloadSize
	}
	return len(m.Payload)
}

// Spill returns m without its payload (only its size), to be read back from
// the log at m.Ref. An empty payload, or a message without a Ref, stays as
// it is.
func (m Message) Spill() Message {
	if m.Spilled() || m.Payload == "" || m.Ref.Seq == 0 {
		return m
	}
	m.PayloadSize = len(m.Payload)
	m.Payload = ""
	return m
}

// Fill returns m with its payload back.
func (m Message) Fill(payload string) Message {
	m.Payload = payload
	m.PayloadSize = 0
	return m
}

// NewID returns a fresh message id: 32 lowercase hex characters from
// crypto/rand.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (it aborts the program instead)
	return hex.EncodeToString(b[:])
}

// Clone returns a copy of m that shares no map with it.
func (m Message) Clone() Message {
	if m.Metadata != nil {
		m.Metadata = maps.Clone(m.Metadata)
	}
	return m
}

// Validate checks the fields every message needs: an id, a sender, a
// recipient and a valid kind. The error wraps ErrInvalidMessage.
func (m Message) Validate() error {
	var missing []string
	if m.ID == "" {
		missing = append(missing, "id")
	}
	if m.Sender == "" {
		missing = append(missing, "sender")
	}
	if m.Recipient == "" {
		missing = append(missing, "recipient")
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: missing %s", ErrInvalidMessage, strings.Join(missing, ", "))
	}
	if !m.Kind.Valid() {
		return fmt.Errorf("%w %s: kind %q is not one of request, response, notification, error", ErrInvalidMessage, m.ID, truncate(string(m.Kind), 64))
	}
	return nil
}

// EventData returns the data of the message.enqueued event for m (SPEC 3):
// message_id, sender, recipient, kind, payload, timestamp (RFC 3339, UTC,
// milliseconds), reply_to (null when empty) and metadata (an object, {} when
// empty). The map shares nothing with m.
func (m Message) EventData() map[string]any {
	var replyTo any
	if m.ReplyTo != "" {
		replyTo = m.ReplyTo
	}
	md := make(map[string]string, len(m.Metadata))
	maps.Copy(md, m.Metadata)
	return map[string]any{
		"message_id": m.ID,
		"sender":     m.Sender,
		"recipient":  m.Recipient,
		"kind":       string(m.Kind),
		"payload":    m.Payload,
		"timestamp":  m.Timestamp.UTC().Format(TimestampFormat),
		"reply_to":   replyTo,
		"metadata":   md,
	}
}

// FromEventData decodes the data of a message.enqueued event. message_id,
// sender, recipient, kind and payload are required strings; timestamp,
// reply_to and metadata may be missing or null; unknown fields are ignored.
// Errors wrap ErrInvalidMessage (or ErrUnknownKind for an unknown kind) and
// name the field.
func FromEventData(raw json.RawMessage) (Message, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return Message{}, fmt.Errorf("%w: %s data is not a JSON object", ErrInvalidMessage, EventEnqueued)
	}
	var m Message
	var err error
	str := func(name string, required bool) string {
		if err != nil {
			return ""
		}
		v, ok := fields[name]
		if !ok || bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			if required {
				err = fmt.Errorf("%w: %s data lacks required field %q", ErrInvalidMessage, EventEnqueued, name)
			}
			return ""
		}
		var s string
		if json.Unmarshal(v, &s) != nil {
			err = fmt.Errorf("%w: %s field %q must be a string, got %s", ErrInvalidMessage, EventEnqueued, name, truncate(string(v), 64))
		}
		return s
	}
	m.ID = str("message_id", true)
	m.Sender = str("sender", true)
	m.Recipient = str("recipient", true)
	kind := str("kind", true)
	m.Payload = str("payload", true)
	ts := str("timestamp", false)
	m.ReplyTo = str("reply_to", false)
	if err != nil {
		return Message{}, err
	}
	for _, f := range []struct{ name, v string }{{"message_id", m.ID}, {"sender", m.Sender}, {"recipient", m.Recipient}} {
		if f.v == "" {
			return Message{}, fmt.Errorf("%w: %s field %q is empty", ErrInvalidMessage, EventEnqueued, f.name)
		}
	}
	if m.Kind, err = ParseKind(kind); err != nil {
		return Message{}, fmt.Errorf("%s %s: %w", EventEnqueued, m.ID, err)
	}
	if ts != "" {
		t, perr := time.Parse(time.RFC3339Nano, ts)
		if perr != nil {
			return Message{}, fmt.Errorf("%w: %s field \"timestamp\" is not an RFC 3339 time: %q", ErrInvalidMessage, EventEnqueued, truncate(ts, 64))
		}
		m.Timestamp = t.UTC()
	}
	if v, ok := fields["metadata"]; ok {
		var md map[string]string
		if json.Unmarshal(v, &md) != nil {
			return Message{}, fmt.Errorf("%w: %s field \"metadata\" must be an object of strings, got %s", ErrInvalidMessage, EventEnqueued, truncate(string(v), 64))
		}
		if len(md) > 0 {
			m.Metadata = md
		}
	}
	return m, nil
}

func truncate(s string, n int) string { return textcut.Cut(s, n, "...") }
