package inbox

import (
	"encoding/json"
	"testing"
)

func BenchmarkPushTake(b *testing.B) {
	q := NewQueue(0)
	m := msg(1, KindRequest, "s")
	ids := []string{m.ID}
	for b.Loop() {
		if err := q.Push(m); err != nil {
			b.Fatal(err)
		}
		if len(q.Take(ids)) != 1 {
			b.Fatal("take failed")
		}
	}
}

func BenchmarkEventDataRoundTrip(b *testing.B) {
	m := sample()
	for b.Loop() {
		raw, err := json.Marshal(m.EventData())
		if err != nil {
			b.Fatal(err)
		}
		if _, err := FromEventData(raw); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNewID(b *testing.B) {
	for b.Loop() {
		_ = NewID()
	}
}
