package openai

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

type chunkToolCall struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

type chunk struct {
	Choices []struct {
		Delta struct {
			Content   *string         `json:"content"`
			ToolCalls []chunkToolCall `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		PromptTokensDetails *struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// pendingCall accumulates one tool call's fragments.
type pendingCall struct {
	index int
	id    string
	name  string
	args  strings.Builder
	// dropped is the size of arguments over the limit, dropped as they
	// came (0: args holds them).
	dropped int
}

// addArgs adds a fragment of arguments within max bytes (0: no bound):
// past it the arguments are dropped and only counted.
func (pc *pendingCall) addArgs(a string, max int) {
	if pc.dropped > 0 {
		pc.dropped += len(a)
		return
	}
	if max > 0 && pc.args.Len()+len(a) > max {
		pc.dropped = pc.args.Len() + len(a)
		pc.args = strings.Builder{}
		return
	}
	pc.args.WriteString(a)
}

// ReadStep implements llm.Wire. It accepts what compatible servers send
// (see the package documentation): arguments fragmented or whole, parallel
// calls that all claim index 0 (a new id starts a new call), comment lines,
// a usage chunk with empty choices, an error object mid-stream, and a
// stream that ends without [DONE] after a finish_reason.
func (Wire) ReadStep(r *sse.Reader, lim llm.StepLimits, onText func(string)) (llm.Step, error) {
	st := stepState{text: llm.NewStepText(lim, onText), maxArgs: lim.MaxArgs}
	chunks := 0
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			if st.finished {
				break
			}
			if chunks == 0 && r.Other > 0 {
				return llm.Step{}, llm.Malformed("the server sent no event-stream data (%d other lines); is base_url an OpenAI-compatible API?", r.Other)
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
		if string(data) == "[DONE]" {
			break
		}
		chunks++
		if t, ok := fastDelta(data); ok {
			if err := st.text.Add(t); err != nil {
				return llm.Step{}, err
			}
			continue
		}
		var c chunk
		if err := json.Unmarshal(data, &c); err != nil {
			return llm.Step{}, llm.Malformed("a stream chunk is not JSON (%v): %.200s", err, data)
		}
		if e := bytes.TrimSpace(c.Error); len(e) > 0 && string(e) != "null" {
			return llm.Step{}, &llm.StreamError{APIError: parseErrorValue(e, "")}
		}
		if err := st.apply(&c); err != nil {
			return llm.Step{}, err
		}
	}
	return st.result(), nil
}

// stepState folds the chunks of one streamed response into a Step.
type stepState struct {
	text     *llm.StepText
	maxArgs  int
	calls    []*pendingCall
	step     llm.Step
	finished bool
}

// apply folds one decoded chunk: its usage, text, tool-call fragments and
// finish reason.
func (st *stepState) apply(c *chunk) error {
	if u := c.Usage; u != nil {
		st.step.Usage.InputTokens, st.step.Usage.OutputTokens = u.PromptTokens, u.CompletionTokens
		if u.PromptTokensDetails != nil {
			st.step.Usage.CachedInputTokens = u.PromptTokensDetails.CachedTokens
		}
	}
	for i := range c.Choices {
		ch := &c.Choices[i]
		if d := ch.Delta.Content; d != nil {
			if err := st.text.Add(*d); err != nil {
				return err
			}
		}
		for _, tc := range ch.Delta.ToolCalls {
			var err error
			if st.calls, err = addFragment(st.calls, tc, st.maxArgs); err != nil {
				return err
			}
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			st.finished = true
			st.step.StopReason = *ch.FinishReason
		}
	}
	return nil
}

// result is the step: its text, and its calls in order.
func (st *stepState) result() llm.Step {
	step := st.step
	step.Text = st.text.String()
	// The calls decide whether the model wants tools, not finish_reason
	// (some servers end a tool-call stream with "stop").
	for _, pc := range st.calls {
		step.Calls = append(step.Calls, llm.Call{ID: pc.id, Name: pc.name, Args: pc.args.String(), ArgsBytes: pc.dropped})
	}
	return step
}

// addFragment adds one tool-call fragment: to the open call with its index,
// or a new call when the index is new or the fragment brings another id.
// Arguments past maxArgs bytes are dropped (pendingCall.addArgs).
func addFragment(calls []*pendingCall, tc chunkToolCall, maxArgs int) ([]*pendingCall, error) {
	var cur *pendingCall
	if tc.Index != nil {
		for i := len(calls) - 1; i >= 0; i-- {
			if calls[i].index == *tc.Index {
				cur = calls[i]
				break
			}
		}
	} else if len(calls) > 0 {
		cur = calls[len(calls)-1]
	}
	if cur == nil || (tc.ID != "" && cur.id != "" && tc.ID != cur.id) {
		idx := len(calls)
		if tc.Index != nil {
			idx = *tc.Index
		}
		cur = &pendingCall{index: idx, id: tc.ID}
		calls = append(calls, cur)
	}
	if cur.id == "" {
		cur.id = tc.ID
	}
	if cur.name == "" {
		cur.name = tc.Function.Name
	}
	if a := bytes.TrimSpace(tc.Function.Arguments); len(a) > 0 && string(a) != "null" {
		if a[0] == '"' {
			var s string
			if err := json.Unmarshal(a, &s); err != nil {
				return nil, llm.Malformed("tool call arguments: %v", err)
			}
			cur.addArgs(s, maxArgs)
		} else {
			cur.addArgs(string(a), maxArgs) // a server that sends the arguments as an object
		}
	}
	return calls, nil
}

var (
	deltaContent = []byte(`"delta":{"content":`)
	deltaKey     = []byte(`"delta":`)
	nullFinish   = []byte(`"finish_reason":null`)
)

// fastDelta reads the text of a chunk that is a plain text delta (one
// choice, delta {"content": "..."}, finish_reason null, nothing else of
// interest) without decoding the whole chunk: most chunks of a stream are
// these. ok is false for any other chunk.
func fastDelta(data []byte) (string, bool) {
	if bytes.Contains(data, []byte(`"tool_calls"`)) || bytes.Contains(data, []byte(`"error"`)) ||
		bytes.Contains(data, []byte(`"usage":{`)) || !bytes.Contains(data, nullFinish) || data[0] != '{' || data[len(data)-1] != '}' {
		return "", false
	}
	i, ok := jsonfast.Once(data, deltaKey)
	if !ok || !bytes.HasPrefix(data[i:], deltaContent) {
		return "", false
	}
	t, end, ok := jsonfast.StringAt(data, i+len(deltaContent))
	if !ok || end >= len(data) || data[end] != '}' {
		return "", false
	}
	return t, true
}
