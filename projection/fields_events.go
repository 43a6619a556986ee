package projection

import (
	"encoding/json"
	"fmt"

	"github.com/warren-dev/warren/internal/jsonfast"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/schema"
)

// Fast decoders for the events a long log holds most of (recovery folds
// millions of them). Each reads the data with jsonfast, which checks the
// whole JSON grammar, and checks the type of every member the event's data
// type has, so that it accepts exactly what encoding/json decodes without
// error, into the same values; it reports false for anything it does not
// handle (a key encoding/json would match case-insensitively, an escaped
// key, invalid UTF-8, which encoding/json substitutes), and the caller then
// decodes with encoding/json, which reports malformed data properly.
// FuzzFastDecoders holds them to that.

// plainKey reports whether a key is one the decoders can compare as is:
// encoding/json matches keys to fields case-insensitively (with Unicode
// folding), so a key with anything but lowercase ASCII letters, digits
// and '_' is left to it.
func plainKey(k []byte) bool {
	for _, c := range k {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

func isNull(v []byte) bool { return string(v) == "null" }

// setString decodes a JSON string member into *dst as encoding/json does
// (null leaves it as it is), reusing prev when the text is the same.
func setString(dst *string, v []byte, prev string) bool {
	if isNull(v) {
		return true
	}
	if p, ok := jsonfast.Plain(v); ok {
		if string(p) == prev {
			*dst = prev
		} else {
			*dst = string(p)
		}
		return true
	}
	s, ok := jsonfast.String(v)
	*dst = s
	return ok
}

// memberString is setString for a value m.Next just returned: a string
// m found without escapes is taken without scanning it again.
func memberString(m *jsonfast.Members, dst *string, v []byte, prev string) bool {
	if p, ok := m.PlainValue(v); ok {
		if string(p) == prev {
			*dst = prev
		} else {
			*dst = string(p)
		}
		return true
	}
	return setString(dst, v, prev)
}

// memberBytes is setBytes for a value m.Next just returned.
func memberBytes(m *jsonfast.Members, dst *[]byte, v []byte) bool {
	if p, ok := m.PlainValue(v); ok {
		*dst = p
		return true
	}
	return setBytes(dst, v)
}

// setInt decodes a JSON number member into *dst as encoding/json does.
func setInt(dst *int, v []byte) bool {
	if isNull(v) {
		return true
	}
	n, ok := jsonfast.Int(v)
	*dst = n
	return ok
}

// setBytes is setString into the text's bytes, without a copy when it
// has no escapes.
func setBytes(dst *[]byte, v []byte) bool {
	if isNull(v) {
		return true
	}
	if p, ok := jsonfast.Plain(v); ok {
		*dst = p
		return true
	}
	s, ok := jsonfast.String(v)
	*dst = []byte(s)
	return ok
}

// isStringValue reports whether v decodes into a string field without
// error (a string, even with invalid UTF-8, or null).
func isStringValue(v []byte) bool { return v[0] == '"' || isNull(v) }

// fastTurnStart decodes turn.start data; strings equal to those of prev
// (the previous run, or nil) are shared rather than copied. Given raw (a
// replay), it checks the prompt and message_ids and leaves them raw there
// instead of decoding them into d (startRaw).
func fastTurnStart(data []byte, prev *Run, d *schema.TurnStartData, raw *startRaw) bool {
	var pr Run
	if prev != nil {
		pr = *prev
	}
	m := jsonfast.Object(data)
	seenIDs := false
	for {
		k, v, ok := m.Next()
		if !ok {
			break
		}
		if !plainKey(k) {
			return false
		}
		good := true
		switch string(k) {
		case "run_id":
			good = memberString(&m, &d.RunID, v, "")
		case "turn":
			good = setInt(&d.Turn, v)
		case "boot_id":
			good = memberString(&m, &d.BootID, v, pr.BootID)
		case "prompt":
			if raw == nil {
				good = memberString(&m, &d.Prompt, v, pr.Prompt)
			} else if good = isStringValue(v); good && !isNull(v) {
				raw.prompt = v // null leaves it, as encoding/json does
			}
		case "provider":
			good = memberString(&m, &d.Provider, v, pr.Provider)
		case "model":
			good = memberString(&m, &d.Model, v, pr.Model)
		case "message_ids":
			if seenIDs {
				// encoding/json decodes a repeated list into the one
				// before (a null element leaves its string): its case.
				return false
			}
			seenIDs = true
			if raw == nil {
				d.MessageIDs, good = stringList(v)
			} else if good = isStringList(v); good {
				raw.msgIDs = v
			}
		}
		if !good {
			return false
		}
	}
	return m.Valid()
}

// startRaw is what a replay keeps of a turn.start's data undecoded: the
// raw JSON values of its prompt and message_ids (nil: absent), checked as
// a string and a list of strings. Only the run still latest when the
// replay ends needs them decoded (State.settleStart); most runs of a long
// log are followed by another.
type startRaw struct{ prompt, msgIDs []byte }

// values decodes the prompt and the message ids as encoding/json would
// into schema.TurnStartData.
func (raw startRaw) values() (prompt string, ids []string, err error) {
	if raw.prompt != nil && !setString(&prompt, raw.prompt, "") {
		// Valid JSON text encoding/json decodes with replacements
		// (invalid UTF-8).
		if err := json.Unmarshal(raw.prompt, &prompt); err != nil {
			return "", nil, fmt.Errorf("turn.start prompt: %w", err)
		}
	}
	if raw.msgIDs != nil {
		var ok bool
		if ids, ok = stringList(raw.msgIDs); !ok {
			if err := json.Unmarshal(raw.msgIDs, &ids); err != nil {
				return "", nil, fmt.Errorf("turn.start message_ids: %w", err)
			}
		}
	}
	return prompt, ids, nil
}

// isStringList reports whether v (a checked JSON value) decodes into a
// []string without error: null, or an array of strings and nulls.
func isStringList(v []byte) bool {
	if isNull(v) {
		return true
	}
	if v[0] != '[' {
		return false
	}
	arr := jsonfast.Array(v)
	for {
		e, ok := arr.Next()
		if !ok {
			break
		}
		if !isStringValue(e) {
			return false
		}
	}
	return arr.Valid()
}

// eachString calls fn with every string of a list isStringList accepted,
// decoded as encoding/json would (a null element: empty), without a copy
// when it has no escapes.
func eachString(v []byte, fn func([]byte)) {
	arr := jsonfast.Array(v)
	for {
		e, ok := arr.Next()
		if !ok {
			return
		}
		switch p, plain := jsonfast.Plain(e); {
		case isNull(e):
			fn(nil)
		case plain:
			fn(p)
		default:
			var s string
			if !setString(&s, e, "") {
				_ = json.Unmarshal(e, &s)
			}
			fn([]byte(s))
		}
	}
}

// stringList decodes a JSON array of strings (null: nil; a null element:
// "") as encoding/json decodes it into a []string.
func stringList(v []byte) ([]string, bool) {
	if isNull(v) {
		return nil, true
	}
	var out []string
	arr := jsonfast.Array(v)
	for {
		e, ok := arr.Next()
		if !ok {
			break
		}
		var s string
		if !setString(&s, e, "") {
			return nil, false
		}
		out = append(out, s)
	}
	if !arr.Valid() {
		return nil, false
	}
	if out == nil {
		out = []string{}
	}
	return out, true
}

// turnEnd is what the fold reads of turn.complete, turn.failed and
// turn.cancelled: the run id without a copy, and the raw response and
// usage (decoded only when needed).
type turnEnd struct {
	RunID    []byte
	Response []byte // raw JSON string or null; nil when absent
	// ResponseText is the response when Decoded (by encoding/json).
	ResponseText string
	Decoded      bool
	Error        string
	Usage        *provider.Usage
}

// Which turn-ending event fastTurnEnd reads.
const (
	endComplete = iota
	endFailed
	endCancelled
)

// fastTurnEnd decodes the data of a turn-ending event (kind: endComplete,
// endFailed or endCancelled), checking the members of its data type.
func fastTurnEnd(data []byte, kind int, d *turnEnd) bool {
	m := jsonfast.Object(data)
	for {
		k, v, ok := m.Next()
		if !ok {
			break
		}
		if !plainKey(k) {
			return false
		}
		good := true
		switch string(k) {
		case "run_id":
			good = memberBytes(&m, &d.RunID, v)
		case "turn":
			var n int
			good = setInt(&n, v)
		case "response":
			if kind == endComplete {
				good = isStringValue(v)
				d.Response = v
			}
		case "usage":
			if kind == endComplete {
				// Rare enough for encoding/json (a pointer: null is nil).
				var u *provider.Usage
				good = json.Unmarshal(v, &u) == nil
				d.Usage = u
			}
		case "error":
			if kind == endFailed {
				good = setString(&d.Error, v, "")
			}
		case "attempts":
			if kind == endFailed {
				var n int
				good = setInt(&n, v)
			}
		}
		if !good {
			return false
		}
	}
	return m.Valid()
}

// fastMessageID reads the message_id of message.delivered without a copy.
func fastMessageID(data []byte) ([]byte, bool) {
	var id []byte
	m := jsonfast.Object(data)
	for {
		k, v, ok := m.Next()
		if !ok {
			break
		}
		if !plainKey(k) {
			return nil, false
		}
		if string(k) == "message_id" && !memberBytes(&m, &id, v) {
			return nil, false
		}
	}
	return id, m.Valid()
}

// toolCallFields is what the fold keeps of a tool.call: the members of
// its data type the fold reads, raw where they stay raw.
type toolCallFields struct {
	Tool     []byte
	Args     json.RawMessage
	Result   json.RawMessage
	Error    string
	RunID    []byte
	Messages json.RawMessage // an array of envelopes, or nil
	// MessageList holds the envelopes instead when encoding/json decoded
	// the data.
	MessageList []json.RawMessage
}

func fastToolCall(data []byte, d *toolCallFields) bool {
	m := jsonfast.Object(data)
	for {
		k, v, ok := m.Next()
		if !ok {
			break
		}
		if !plainKey(k) {
			return false
		}
		good := true
		switch string(k) {
		case "tool":
			good = memberBytes(&m, &d.Tool, v)
		case "args":
			d.Args = v
		case "result":
			d.Result = v
		case "error":
			good = setString(&d.Error, v, "")
		case "run_id":
			good = memberBytes(&m, &d.RunID, v)
		case "messages":
			switch {
			case isNull(v):
				d.Messages = nil // as encoding/json: the last one counts
			case v[0] == '[':
				d.Messages = v
			default:
				good = false
			}
		}
		if !good {
			return false
		}
	}
	return m.Valid()
}
