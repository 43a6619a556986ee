package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"

	"github.com/warren-dev/warren/internal/jsonfast"
	"github.com/warren-dev/warren/internal/sse"
	"github.com/warren-dev/warren/provider/llm"
)

type usage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

type event struct {
	Type    string `json:"type"`
	Index   int    `json:"index"`
	Message *struct {
		Usage usage `json:"usage"`
	} `json:"message"`
	ContentBlock *struct {
		Type  string          `json:"type"`
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
		Text  string          `json:"text"`
	} `json:"content_block"`
	Delta *struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage *usage `json:"usage"`
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

type block struct {
	typ     string
	id      string
	name    string
	input   json.RawMessage
	partial strings.Builder
	deltas  bool
}

// ReadStep implements llm.Wire: message_start, content_block_start/delta/
// stop (text_delta, input_json_delta; other block types such as thinking
// are read and dropped), message_delta, message_stop, ping, error, and
// unknown events (ignored).
func (Wire) ReadStep(r *sse.Reader, onText func(string)) (llm.Step, error) {
	var (
		text   strings.Builder
		blocks []*block
		step   llm.Step
		events int
		in     usage
	)
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			if events == 0 && r.Other > 0 {
				return llm.Step{}, llm.Malformed("the server sent no event-stream data (%d other lines); is base_url the Anthropic API?", r.Other)
			}
			return llm.Step{}, llm.ErrStreamCut
		}
		if err != nil {
			return llm.Step{}, err
		}
		data := bytes.TrimSpace(ev.Data)
		if len(data) == 0 {
			continue
		}
		if idx, t, ok := fastTextDelta(data); ok && idx < len(blocks) && blocks[idx] != nil {
			events++
			if t != "" {
				text.WriteString(t)
				onText(t)
			}
			continue
		}
		var e event
		if err := json.Unmarshal(data, &e); err != nil {
			return llm.Step{}, llm.Malformed("an event is not JSON (%v): %.200s", err, data)
		}
		events++
		switch e.Type {
		case "message_start":
			if e.Message != nil {
				in = e.Message.Usage
			}
		case "content_block_start":
			if e.ContentBlock == nil || e.Index < 0 || e.Index > 4096 {
				return llm.Step{}, llm.Malformed("content_block_start without a block or with index %d", e.Index)
			}
			for len(blocks) <= e.Index {
				blocks = append(blocks, nil)
			}
			b := &block{typ: e.ContentBlock.Type, id: e.ContentBlock.ID, name: e.ContentBlock.Name, input: e.ContentBlock.Input}
			blocks[e.Index] = b
			if b.typ == "text" && e.ContentBlock.Text != "" {
				text.WriteString(e.ContentBlock.Text)
				onText(e.ContentBlock.Text)
			}
		case "content_block_delta":
			if e.Delta == nil || e.Index < 0 || e.Index >= len(blocks) || blocks[e.Index] == nil {
				return llm.Step{}, llm.Malformed("content_block_delta for block %d, which did not start", e.Index)
			}
			b := blocks[e.Index]
			switch e.Delta.Type {
			case "text_delta":
				if e.Delta.Text != "" {
					text.WriteString(e.Delta.Text)
					onText(e.Delta.Text)
				}
			case "input_json_delta":
				b.partial.WriteString(e.Delta.PartialJSON)
				b.deltas = true
			}
		case "message_delta":
			if e.Delta != nil && e.Delta.StopReason != "" {
				step.StopReason = e.Delta.StopReason
			}
			if e.Usage != nil {
				if e.Usage.OutputTokens > 0 {
					in.OutputTokens = e.Usage.OutputTokens
				}
				if e.Usage.InputTokens > 0 {
					in.InputTokens = e.Usage.InputTokens
				}
				if e.Usage.CacheReadInputTokens > 0 {
					in.CacheReadInputTokens = e.Usage.CacheReadInputTokens
				}
				if e.Usage.CacheCreationInputTokens > 0 {
					in.CacheCreationInputTokens = e.Usage.CacheCreationInputTokens
				}
			}
		case "error":
			ae := llm.APIError{Message: string(data)}
			if e.Error != nil {
				ae = llm.APIError{Type: e.Error.Type, Message: e.Error.Message}
			}
			return llm.Step{}, &llm.StreamError{APIError: ae}
		case "message_stop":
			step.Text = text.String()
			for _, b := range blocks {
				if b == nil || b.typ != "tool_use" {
					continue
				}
				args := string(bytes.TrimSpace(b.input))
				if b.deltas {
					args = b.partial.String()
				}
				step.Calls = append(step.Calls, llm.Call{ID: b.id, Name: b.name, Args: args})
			}
			step.Usage.InputTokens = in.InputTokens + in.CacheReadInputTokens + in.CacheCreationInputTokens
			step.Usage.OutputTokens = in.OutputTokens
			step.Usage.CachedInputTokens = in.CacheReadInputTokens
			return step, nil
		}
	}
}

var (
	textDeltaHead = []byte(`{"type":"content_block_delta","index":`)
	textDeltaMid  = []byte(`,"delta":{"type":"text_delta","text":`)
)

// fastTextDelta reads a text_delta event in the API's own field order
// without decoding it whole (most events of a stream are these); ok is
// false for anything else.
func fastTextDelta(data []byte) (index int, text string, ok bool) {
	if !bytes.HasPrefix(data, textDeltaHead) {
		return 0, "", false
	}
	i := len(textDeltaHead)
	start := i
	for i < len(data) && data[i] >= '0' && data[i] <= '9' && i-start < 6 {
		index = index*10 + int(data[i]-'0')
		i++
	}
	if i == start || !bytes.HasPrefix(data[i:], textDeltaMid) {
		return 0, "", false
	}
	t, end, ok := jsonfast.StringAt(data, i+len(textDeltaMid))
	if !ok || string(data[end:]) != "}}" {
		return 0, "", false
	}
	return index, t, true
}
