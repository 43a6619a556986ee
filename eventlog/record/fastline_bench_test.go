package record

import (
	"testing"
	"time"
)

// BenchmarkParseWriterLayout measures the positional parser on a usual
// line body of the writer's layout (the path of every line at recovery).
func BenchmarkParseWriterLayout(b *testing.B) {
	p, err := Prepare(Record{Event: "message.enqueued", Data: map[string]any{
		"message_id": "00000063000000000000000100000000", "sender": "b1", "recipient": "b2",
		"kind": "request", "payload": "Step 0: check the results of batch 1 and send me a short summary.",
	}}, MaxLineBytes)
	if err != nil {
		b.Fatal(err)
	}
	line := AppendLine(nil, 12345, time.Date(2026, 2, 28, 23, 59, 59, 999e6, time.UTC), &p)
	body := line[:len(line)-1-crcSuffixLen]
	names := &nameTable{}
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, ok := parseWriterLayout(body, lineMode{borrow: true, names: names}); !ok {
			b.Fatal("refused")
		}
	}
}

// BenchmarkParseTS measures the timestamp parser alone.
func BenchmarkParseTS(b *testing.B) {
	ts := []byte("2026-02-28T23:59:59.999Z")
	for b.Loop() {
		if _, ok := parseTS(ts); !ok {
			b.Fatal("refused")
		}
	}
}
