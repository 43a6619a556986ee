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
	var m inbox.Message
	var kind, ts string
	var haveID, haveSender, haveRecipient, haveKind, havePayload bool
	var md map[string]string
	it := jsonfast.Object(raw)
	str := func(v []byte, dst *string, have *bool) bool {
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
	var optional bool
	for {
		k, v, ok := it.Next()
		if !ok {
			break
		}
		good := true
		switch string(k) {
		case "message_id":
			good = str(v, &m.ID, &haveID)
		case "sender":
			good = str(v, &m.Sender, &haveSender)
		case "recipient":
			good = str(v, &m.Recipient, &haveRecipient)
		case "kind":
			good = str(v, &kind, &haveKind)
		case "payload":
			good = str(v, &m.Payload, &havePayload)
		case "timestamp":
			good = str(v, &ts, &optional)
		case "reply_to":
			good = str(v, &m.ReplyTo, &optional)
		case "metadata":
			md, good = stringMap(v)
		}
		if !good {
			return inbox.Message{}, false
		}
	}
	if !it.Valid() || !haveID || !haveSender || !haveRecipient || !haveKind || !havePayload ||
		m.ID == "" || m.Sender == "" || m.Recipient == "" {
		return inbox.Message{}, false
	}
	if m.Kind = inbox.Kind(kind); !m.Kind.Valid() {
		return inbox.Message{}, false
	}
	if ts != "" {
		t, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			return inbox.Message{}, false
		}
		m.Timestamp = t.UTC()
	}
	if len(md) > 0 {
		m.Metadata = md
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
