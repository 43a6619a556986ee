package inbox

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// FuzzFromEventData: no input panics; every error is one of the documented
// ones; whatever decodes re-encodes to data that decodes to the same message.
func FuzzFromEventData(f *testing.F) {
	raw, _ := json.Marshal(sample().EventData())
	f.Add(string(raw))
	f.Add(`{"message_id":"m","sender":"s","recipient":"r","kind":"error","payload":""}`)
	f.Add(`{"message_id":"m","sender":"s","recipient":"r","kind":"x","payload":"","metadata":{"a":"b"}}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, s string) {
		m, err := FromEventData(json.RawMessage(s))
		if err != nil {
			if !errors.Is(err, ErrInvalidMessage) && !errors.Is(err, ErrUnknownKind) {
				t.Fatalf("undocumented error: %v", err)
			}
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("decoded an invalid message: %v", err)
		}
		again, err := json.Marshal(m.EventData())
		if err != nil {
			t.Fatal(err)
		}
		m2, err := FromEventData(again)
		if err != nil {
			t.Fatalf("re-decoding %s: %v", again, err)
		}
		m.Timestamp = m.Timestamp.Truncate(1e6) // the encoding keeps milliseconds
		if !m.Timestamp.Equal(m2.Timestamp) {
			t.Fatalf("timestamp %v became %v", m.Timestamp, m2.Timestamp)
		}
		m.Timestamp = m2.Timestamp
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("round trip changed the message:\n%#v\n%#v", m, m2)
		}
	})
}
