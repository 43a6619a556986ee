package anthropic

import (
	"bytes"
	"testing"

	"github.com/warren-dev/warren/internal/sse"
	"github.com/warren-dev/warren/provider/llm"
)

func TestFastTextDelta(t *testing.T) {
	idx, text, ok := fastTextDelta([]byte(`{"type":"content_block_delta","index":12,"delta":{"type":"text_delta","text":"a\nb"}}`))
	if !ok || idx != 12 || text != "a\nb" {
		t.Fatalf("= %d %q %v", idx, text, ok)
	}
	for _, in := range []string{
		`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"},"extra":1}`,
		`{"index":0,"type":"content_block_delta","delta":{"type":"text_delta","text":"x"}}`,
		`{"type":"content_block_delta","index":,"delta":{"type":"text_delta","text":"x"}}`,
	} {
		if _, _, ok := fastTextDelta([]byte(in)); ok {
			t.Errorf("fast path taken for %s", in)
		}
	}
}

func FuzzReadStep(f *testing.F) {
	f.Add([]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3}}}\n\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"x\",\"input\":{}}}\n\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}\n\ndata: {\"type\":\"message_stop\"}\n\n"))
	f.Add([]byte("data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n\n"))
	f.Add([]byte("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"o\"}}\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := sse.NewReader(bytes.NewReader(data), 1<<16)
		_, _ = Wire{}.ReadStep(r, llm.StepLimits{}, func(string) {})
		_ = Wire{}.ParseError(data)
	})
}
