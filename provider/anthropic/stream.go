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
	// dropped is the size of an input over the limit, dropped as it came
	// (0: input or partial holds it).
	dropped int
}

// ReadStep implements llm.Wire: message_start, content_block_start/delta/
// stop (text_delta, input_json_delta; other block types such as thinking
// are read and dropped), message_delta, message_stop, ping, error, and
// unknown events (ignored).
func (Wire) ReadStep(r *sse.Reader, lim llm.StepLimits, onText func(string)) (llm.Step, error) {
	st := stepReader{text: llm.NewStepText(lim, onText), lim: lim}
	events := 0
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
		if idx, t, ok := fastTextDelta(data); ok && idx < len(st.blocks) && st.blocks[idx] != nil {
			events++
			if err := st.emit(t); err != nil {
				return llm.Step{}, err
			}
			continue
		}
		var e event
		if err := json.Unmarshal(data, &e); err != nil {
			return llm.Step{}, llm.Malformed("an event is not JSON (%v): %.200s", err, data)
		}
		events++
		done, err := st.apply(&e, data)
		if err != nil {
			return llm.Step{}, err
		}
		if done {
			return st.step, nil
		}
	}
}

// stepReader folds the events of one streamed message into a Step.
type stepReader struct {
	text   *llm.StepText
	lim    llm.StepLimits
	blocks []*block
	step   llm.Step
	in     usage
}

// emit adds streamed text to the step and hands it to the client; text
// past the limit ends the step with an error.
func (st *stepReader) emit(t string) error { return st.text.Add(t) }

// apply folds one decoded event; done is true at message_stop.
func (st *stepReader) apply(e *event, data []byte) (done bool, err error) {
	switch e.Type {
	case "message_start":
		if e.Message != nil {
			st.in = e.Message.Usage
		}
	case "content_block_start":
		return false, st.startBlock(e)
	case "content_block_delta":
		return false, st.delta(e)
	case "message_delta":
		st.messageDelta(e)
	case "error":
		ae := llm.APIError{Message: string(data)}
		if e.Error != nil {
			ae = llm.APIError{Type: e.Error.Type, Message: e.Error.Message}
		}
		return true, &llm.StreamError{APIError: ae}
	case "message_stop":
		st.finish()
		return true, nil
	}
	return false, nil
}

func (st *stepReader) startBlock(e *event) error {
	if e.ContentBlock == nil || e.Index < 0 || e.Index > 4096 {
		return llm.Malformed("content_block_start without a block or with index %d", e.Index)
	}
	for len(st.blocks) <= e.Index {
		st.blocks = append(st.blocks, nil)
	}
	b := &block{typ: e.ContentBlock.Type, id: e.ContentBlock.ID, name: e.ContentBlock.Name, input: e.ContentBlock.Input}
	if n := len(b.input); st.lim.MaxArgs > 0 && n > st.lim.MaxArgs {
		b.input, b.dropped = nil, n
	}
	st.blocks[e.Index] = b
	if b.typ == "text" {
		return st.emit(e.ContentBlock.Text)
	}
	return nil
}

func (st *stepReader) delta(e *event) error {
	if e.Delta == nil || e.Index < 0 || e.Index >= len(st.blocks) || st.blocks[e.Index] == nil {
		return llm.Malformed("content_block_delta for block %d, which did not start", e.Index)
	}
	b := st.blocks[e.Index]
	switch e.Delta.Type {
	case "text_delta":
		return st.emit(e.Delta.Text)
	case "input_json_delta":
		b.deltas = true
		switch p := e.Delta.PartialJSON; {
		case b.dropped > 0:
			b.dropped += len(p)
		case st.lim.MaxArgs > 0 && b.partial.Len()+len(p) > st.lim.MaxArgs:
			b.dropped = b.partial.Len() + len(p)
			b.partial = strings.Builder{}
		default:
			b.partial.WriteString(p)
		}
	}
	return nil
}

// messageDelta takes the stop reason and the usage counts a message_delta
// reports (a count it leaves at zero keeps message_start's).
func (st *stepReader) messageDelta(e *event) {
	if e.Delta != nil && e.Delta.StopReason != "" {
		st.step.StopReason = e.Delta.StopReason
	}
	if e.Usage == nil {
		return
	}
	keep := func(dst *int, v int) {
		if v > 0 {
			*dst = v
		}
	}
	keep(&st.in.OutputTokens, e.Usage.OutputTokens)
	keep(&st.in.InputTokens, e.Usage.InputTokens)
	keep(&st.in.CacheReadInputTokens, e.Usage.CacheReadInputTokens)
	keep(&st.in.CacheCreationInputTokens, e.Usage.CacheCreationInputTokens)
}

// finish completes the step at message_stop: its text, its tool calls in
// block order, and its usage.
func (st *stepReader) finish() {
	st.step.Text = st.text.String()
	for _, b := range st.blocks {
		if b == nil || b.typ != "tool_use" {
			continue
		}
		args := string(bytes.TrimSpace(b.input))
		if b.deltas {
			args = b.partial.String()
		}
		if b.dropped > 0 {
			args = ""
		}
		st.step.Calls = append(st.step.Calls, llm.Call{ID: b.id, Name: b.name, Args: args, ArgsBytes: b.dropped})
	}
	in := st.in
	st.step.Usage.InputTokens = in.InputTokens + in.CacheReadInputTokens + in.CacheCreationInputTokens
	st.step.Usage.OutputTokens = in.OutputTokens
	st.step.Usage.CachedInputTokens = in.CacheReadInputTokens
	st.step.Usage.CacheWriteInputTokens = in.CacheCreationInputTokens
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
