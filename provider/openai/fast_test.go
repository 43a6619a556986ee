package openai

import (
	"bytes"
	"testing"

	"github.com/warren-dev/warren/internal/sse"
	"github.com/warren-dev/warren/provider/llm"
)

func TestFastDelta(t *testing.T) {
	text, ok := fastDelta([]byte(`{"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hi \"you\""},"logprobs":null,"finish_reason":null}]}`))
	if !ok || text != `hi "you"` {
		t.Fatalf("= %q %v", text, ok)
	}
	for _, in := range []string{
		`{"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":"stop"}]}`,
		`{"choices":[{"index":0,"delta":{"content":"a","tool_calls":[]},"finish_reason":null}]}`,
		`{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
		`{"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null},{"index":1,"delta":{"content":"b"},"finish_reason":null}]}`,
		`{"choices":[],"usage":{"prompt_tokens":1},"finish_reason":null}`,
		`{"error":{"message":"x"},"finish_reason":null,"delta":{"content":"a"}}`,
	} {
		if _, ok := fastDelta([]byte(in)); ok {
			t.Errorf("fast path taken for %s", in)
		}
	}
}

func FuzzReadStep(f *testing.F) {
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":null}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"function\":{\"name\":\"x\",\"arguments\":\"{}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n"))
	f.Add([]byte(": c\n\ndata: {\"error\":{\"code\":429}}\n\n"))
	f.Add([]byte("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1}}\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := sse.NewReader(bytes.NewReader(data), 1<<16)
		_, _ = Wire{}.ReadStep(r, llm.StepLimits{}, func(string) {})
		_ = Wire{}.ParseError(data)
	})
}
