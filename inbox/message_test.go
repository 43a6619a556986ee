package inbox

import (
	"encoding/json"
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestParseKind(t *testing.T) {
	for _, k := range Kinds() {
		got, err := ParseKind(string(k))
		if err != nil || got != k {
			t.Errorf("ParseKind(%q) = %q, %v", k, got, err)
		}
	}
	for _, s := range []string{"", "Request", "multicast", "req"} {
		_, err := ParseKind(s)
		if !errors.Is(err, ErrUnknownKind) || !strings.Contains(err.Error(), "request, response, notification, error") {
			t.Errorf("ParseKind(%q) = %v; want ErrUnknownKind listing the kinds", s, err)
		}
	}
}

func TestNewID(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-f]{32}$`)
	seen := map[string]bool{}
	for range 1000 {
		id := NewID()
		if !re.MatchString(id) {
			t.Fatalf("NewID() = %q, want 32 lowercase hex", id)
		}
		if seen[id] {
			t.Fatalf("NewID() repeated %s", id)
		}
		seen[id] = true
	}
}

func sample() Message {
	return Message{
		ID:        "0123456789abcdef0123456789abcdef",
		Sender:    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		Recipient: "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
		Kind:      KindRequest,
		Payload:   "hello \"world\"\nline two ✓",
		Timestamp: time.Date(2026, 11, 22, 10, 1, 10, 123_000_000, time.UTC),
		ReplyTo:   "fedcba9876543210fedcba9876543210",
		Metadata:  map[string]string{"broadcast_id": "x", "empty": ""},
	}
}

func TestEventDataExactFields(t *testing.T) {
	m := sample()
	m.Timestamp = time.Date(2026, 11, 22, 11, 1, 10, 123_456_789, time.FixedZone("CET", 3600))
	raw, err := json.Marshal(m.EventData())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"kind":"request","message_id":"0123456789abcdef0123456789abcdef","metadata":{"broadcast_id":"x","empty":""},` +
		`"payload":"hello \"world\"\nline two ✓","recipient":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","reply_to":"fedcba9876543210fedcba9876543210",` +
		`"sender":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","timestamp":"2026-11-22T10:01:10.123Z"}`
	if string(raw) != want {
		t.Fatalf("EventData JSON =\n%s\nwant\n%s", raw, want)
	}
	// Empty reply_to is null, nil metadata is {}.
	m.ReplyTo, m.Metadata = "", nil
	m.Timestamp = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	d := m.EventData()
	if d["reply_to"] != nil {
		t.Errorf("reply_to = %#v, want nil", d["reply_to"])
	}
	raw, _ = json.Marshal(d)
	if !strings.Contains(string(raw), `"metadata":{}`) || !strings.Contains(string(raw), `"reply_to":null`) ||
		!strings.Contains(string(raw), `"timestamp":"2026-01-02T03:04:05.000Z"`) {
		t.Errorf("EventData JSON = %s", raw)
	}
	// The map shares nothing with the message.
	m.Metadata = map[string]string{"k": "v"}
	m.EventData()["metadata"].(map[string]string)["k"] = "changed"
	if m.Metadata["k"] != "v" {
		t.Error("EventData metadata aliases the message's map")
	}
}

func TestEventDataRoundTrip(t *testing.T) {
	for _, m := range []Message{
		sample(),
		func() Message { m := sample(); m.ReplyTo, m.Metadata, m.Kind = "", nil, KindError; return m }(),
		func() Message { m := sample(); m.Sender, m.Recipient, m.Payload = System, User, ""; return m }(),
		func() Message { m := sample(); m.Kind = KindNotification; return m }(),
		func() Message { m := sample(); m.Kind = KindResponse; return m }(),
	} {
		raw, err := json.Marshal(m.EventData())
		if err != nil {
			t.Fatal(err)
		}
		got, err := FromEventData(raw)
		if err != nil {
			t.Fatalf("FromEventData(%s): %v", raw, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("round trip:\n got %#v\nwant %#v", got, m)
		}
	}
}

func TestFromEventDataTolerates(t *testing.T) {
	base := `"message_id":"m1","sender":"SYSTEM","recipient":"r1","kind":"notification","payload":"p"`
	for _, tc := range []struct {
		desc, raw string
		check     func(Message) bool
	}{
		{"missing optional fields", `{` + base + `}`, func(m Message) bool {
			return m.Timestamp.IsZero() && m.ReplyTo == "" && m.Metadata == nil && m.Kind == KindNotification
		}},
		{"nulls", `{` + base + `,"timestamp":null,"reply_to":null,"metadata":null}`, func(m Message) bool {
			return m.Timestamp.IsZero() && m.ReplyTo == "" && m.Metadata == nil
		}},
		{"unknown fields", `{` + base + `,"future":{"x":[1,2]},"priority":3}`, func(m Message) bool { return m.ID == "m1" }},
		{"timestamp without ms, offset", `{` + base + `,"timestamp":"2026-11-22T11:00:00+01:00"}`, func(m Message) bool {
			return m.Timestamp.Equal(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)) && m.Timestamp.Location() == time.UTC
		}},
		{"empty metadata", `{` + base + `,"metadata":{}}`, func(m Message) bool { return m.Metadata == nil }},
	} {
		m, err := FromEventData(json.RawMessage(tc.raw))
		if err != nil || !tc.check(m) {
			t.Errorf("%s: FromEventData = %+v, %v", tc.desc, m, err)
		}
	}
}

func TestFromEventDataErrors(t *testing.T) {
	fields := map[string]string{
		"message_id": `"m1"`, "sender": `"s"`, "recipient": `"r"`, "kind": `"request"`, "payload": `"p"`,
	}
	build := func(override map[string]string, drop string) json.RawMessage {
		parts := []string{}
		for _, k := range []string{"message_id", "sender", "recipient", "kind", "payload", "timestamp", "metadata"} {
			v, ok := fields[k]
			if o, has := override[k]; has {
				v, ok = o, true
			}
			if !ok || k == drop {
				continue
			}
			parts = append(parts, `"`+k+`":`+v)
		}
		return json.RawMessage("{" + strings.Join(parts, ",") + "}")
	}
	for _, tc := range []struct {
		desc   string
		raw    json.RawMessage
		err    error
		msgHas string
	}{
		{"not json", json.RawMessage(`{"message_id":`), ErrInvalidMessage, "not a JSON object"},
		{"array", json.RawMessage(`[1]`), ErrInvalidMessage, "not a JSON object"},
		{"null", json.RawMessage(`null`), ErrInvalidMessage, "not a JSON object"},
		{"missing id", build(nil, "message_id"), ErrInvalidMessage, `"message_id"`},
		{"missing sender", build(nil, "sender"), ErrInvalidMessage, `"sender"`},
		{"missing recipient", build(nil, "recipient"), ErrInvalidMessage, `"recipient"`},
		{"missing kind", build(nil, "kind"), ErrInvalidMessage, `"kind"`},
		{"missing payload", build(nil, "payload"), ErrInvalidMessage, `"payload"`},
		{"null id", build(map[string]string{"message_id": "null"}, ""), ErrInvalidMessage, `"message_id"`},
		{"empty id", build(map[string]string{"message_id": `""`}, ""), ErrInvalidMessage, `"message_id" is empty`},
		{"numeric id", build(map[string]string{"message_id": "12"}, ""), ErrInvalidMessage, `"message_id" must be a string`},
		{"unknown kind", build(map[string]string{"kind": `"multicast"`}, ""), ErrUnknownKind, `"multicast"`},
		{"bad timestamp", build(map[string]string{"timestamp": `"yesterday"`}, ""), ErrInvalidMessage, "RFC 3339"},
		{"metadata not object", build(map[string]string{"metadata": `[1]`}, ""), ErrInvalidMessage, `"metadata"`},
		{"metadata non-string value", build(map[string]string{"metadata": `{"a":1}`}, ""), ErrInvalidMessage, "object of strings"},
	} {
		_, err := FromEventData(tc.raw)
		if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.msgHas) {
			t.Errorf("%s: FromEventData(%s) = %v; want %v containing %q", tc.desc, tc.raw, err, tc.err, tc.msgHas)
		}
	}
}

func TestFormatPrompt(t *testing.T) {
	names := map[string]string{"a": "lead", "b": "worker"}
	name := func(s string) string {
		if n, ok := names[s]; ok {
			return n
		}
		return s
	}
	one := []Message{{Sender: "a", Payload: "do it\nnow"}}
	if got, want := FormatPrompt(one, name), "Message from lead:\ndo it\nnow"; got != want {
		t.Errorf("one message: %q, want %q", got, want)
	}
	many := []Message{{Sender: "a", Payload: "first"}, {Sender: System, Payload: "second"}, {Sender: "b", Payload: "third"}}
	if got, want := FormatPrompt(many, name), "1. From lead: first\n2. From SYSTEM: second\n3. From worker: third"; got != want {
		t.Errorf("several messages: %q, want %q", got, want)
	}
	if got := FormatPrompt(nil, name); got != "" {
		t.Errorf("no messages: %q", got)
	}
	if got, want := FormatPrompt(one, nil), "Message from a:\ndo it\nnow"; got != want {
		t.Errorf("nil name func: %q, want %q", got, want)
	}
}
