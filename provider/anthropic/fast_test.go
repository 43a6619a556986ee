package anthropic

import "testing"

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
