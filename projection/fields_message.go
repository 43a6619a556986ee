package projection

import (
	"encoding/json"
	"time"

	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/internal/jsonfast"
)

// messageFromData decodes message.enqueued data as inbox.FromEventData
// does (same message, same errors): with fastMessage when it can, with
// inbox.FromEventData otherwise (and for every error).
func messageFromData(raw json.RawMessage) (inbox.Message, error) {
	if m, ok := fastMessage(raw); ok {
		return m, nil
	}
	return inbox.FromEventData(raw)
}

// fastMessage decodes message.enqueued data in the one shape it handles:
// an object whose members inbox.FromEventData reads are strings (or null
// for the optional ones), with a known kind, an RFC 3339 timestamp and
// metadata of strings. It reports false for anything else, error cases
// included, which inbox.FromEventData then reports. FuzzFastMessage holds
// it to inbox.FromEventData.
func fastMessage(raw []byte) (inbox.Message, bool) {
	var f messageFields
	it := jsonfast.Object(raw)
	for {
		k, v, ok := it.Next()
		if !ok {
			break
		}
		if !f.member(&it, k, v) {
			return inbox.Message{}, false
		}
	}
	if !it.Valid() {
		return inbox.Message{}, false
	}
	return f.message()
}

// messageFields collects the members of message.enqueued data that
// fastMessage reads.
type messageFields struct {
	m                                                        inbox.Message
	kind, ts                                                 string
	haveID, haveSender, haveRecipient, haveKind, havePayload bool
	optional                                                 bool // the presence of an optional member: unused
	md                                                       map[string]string
}

// member takes one member (k, v) of the object it reads; false when its
// value is not what fastMessage handles.
func (f *messageFields) member(it *jsonfast.Members, k, v []byte) bool {
	switch string(k) {
	case "message_id":
		return messageString(it, v, &f.m.ID, &f.haveID)
	case "sender":
		return messageString(it, v, &f.m.Sender, &f.haveSender)
	case "recipient":
		return messageString(it, v, &f.m.Recipient, &f.haveRecipient)
	case "kind":
		return messageString(it, v, &f.kind, &f.haveKind)
	case "payload":
		return messageString(it, v, &f.m.Payload, &f.havePayload)
	case "timestamp":
		return messageString(it, v, &f.ts, &f.optional)
	case "reply_to":
		return messageString(it, v, &f.m.ReplyTo, &f.optional)
	case "metadata":
		var good bool
		f.md, good = stringMap(v)
		return good
	}
	return true
}

// messageString decodes the string (or null: "", not present) v, the
// value it read last, into *dst and *have; false for anything else.
func messageString(it *jsonfast.Members, v []byte, dst *string, have *bool) bool {
	if isNull(v) {
		*dst, *have = "", false
		return true
	}
	if p, ok := it.PlainValue(v); ok {
		*dst, *have = string(p), true
		return true
	}
	s, ok := jsonfast.String(v)
	*dst, *have = s, ok
	return ok
}

// message checks the collected members as inbox.FromEventData does and
// builds the message; false where it would report an error.
func (f *messageFields) message() (inbox.Message, bool) {
	m := f.m
	if !f.haveID || !f.haveSender || !f.haveRecipient || !f.haveKind || !f.havePayload ||
		m.ID == "" || m.Sender == "" || m.Recipient == "" {
		return inbox.Message{}, false
	}
	if m.Kind = inbox.Kind(f.kind); !m.Kind.Valid() {
		return inbox.Message{}, false
	}
	if f.ts != "" {
		t, err := time.Parse(time.RFC3339Nano, f.ts)
		if err != nil {
			return inbox.Message{}, false
		}
		m.Timestamp = t.UTC()
	}
	if len(f.md) > 0 {
		m.Metadata = f.md
	}
	return m, true
}

// stringMap decodes a JSON object of strings (null: nil) as encoding/json
// decodes it into a map[string]string; false for anything else.
func stringMap(v []byte) (map[string]string, bool) {
	if isNull(v) {
		return nil, true
	}
	var md map[string]string
	it := jsonfast.Object(v)
	for {
		k, val, ok := it.Next()
		if !ok {
			break
		}
		s, good := jsonfast.String(val)
		if !good {
			return nil, false
		}
		if md == nil {
			md = map[string]string{}
		}
		md[string(k)] = s
	}
	if !it.Valid() {
		return nil, false
	}
	if md == nil {
		md = map[string]string{}
	}
	return md, true
}
