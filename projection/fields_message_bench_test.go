package projection

import (
	"encoding/json"
	"testing"

	"github.com/warren-dev/warren/inbox"
)

// BenchmarkFastMessage measures the message.enqueued decoder of the fold
// on usual data (with metadata and a timestamp), against the general one.
func BenchmarkFastMessage(b *testing.B) {
	m := inbox.Message{ID: "00000063000000000000000100000000", Sender: "b0000000000000000000000000000063",
		Recipient: "b0000000000000000000000000000000", Kind: inbox.KindRequest,
		Payload:  "Step 0: check the results of batch 1 and send me a short summary of what changed.",
		Metadata: map[string]string{"reminder_id": "x"}}
	raw, err := json.Marshal(m.EventData())
	if err != nil {
		b.Fatal(err)
	}
	b.Run("fast", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			if _, ok := fastMessage(raw); !ok {
				b.Fatal("refused")
			}
		}
	})
	b.Run("FromEventData", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			if _, err := inbox.FromEventData(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
}
