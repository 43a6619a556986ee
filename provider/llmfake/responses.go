package llmfake

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The OpenAI Responses API as Codex speaks it (reference/providers.md 1.4,
// 5.1): POST /v1/responses with the whole conversation as `input` items
// (store:false), answered by typed SSE events
//
//	response.created, response.in_progress
//	response.output_item.added {item: message}
//	response.content_part.added, response.output_text.delta..., response.output_text.done,
//	response.content_part.done, response.output_item.done {item: message, completed}
//	response.output_item.added {item: function_call [namespace]}
//	response.function_call_arguments.delta..., response.function_call_arguments.done,
//	response.output_item.done {item: function_call, completed}
//	response.completed {response: {id, status, output, usage}}
//
// with no [DONE]. A mid-stream error (ErrorAfter) is response.failed with
// the error in the response.

// responsesEvents renders a reply as Responses stream events.
func responsesEvents(rep Reply, req Request) []string {
	m := model(req)
	var evs []string
	seq := 0
	add := func(typ string, v map[string]any) {
		v["type"], v["sequence_number"] = typ, seq
		seq++
		evs = append(evs, "event: "+typ+"\ndata: "+mustJSON(v)+"\n\n")
	}
	resp := func(status string, output []any) map[string]any {
		return map[string]any{"id": "resp_fake", "object": "response", "created_at": 1700000000, "status": status,
			"model": m, "output": output, "error": nil, "incomplete_details": nil, "store": false}
	}
	add("response.created", map[string]any{"response": resp("in_progress", []any{})})
	add("response.in_progress", map[string]any{"response": resp("in_progress", []any{})})
	var output []any
	idx := 0
	if rep.Text != "" {
		id := "msg_fake_0"
		add("response.output_item.added", map[string]any{"output_index": idx, "item": map[string]any{
			"id": id, "type": "message", "status": "in_progress", "role": "assistant", "content": []any{}}})
		add("response.content_part.added", map[string]any{"item_id": id, "output_index": idx, "content_index": 0,
			"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
		for _, t := range split(rep.Text, rep.Chunk) {
			add("response.output_text.delta", map[string]any{"item_id": id, "output_index": idx, "content_index": 0, "delta": t, "logprobs": []any{}})
		}
		part := map[string]any{"type": "output_text", "text": rep.Text, "annotations": []any{}}
		add("response.output_text.done", map[string]any{"item_id": id, "output_index": idx, "content_index": 0, "text": rep.Text, "logprobs": []any{}})
		add("response.content_part.done", map[string]any{"item_id": id, "output_index": idx, "content_index": 0, "part": part})
		item := map[string]any{"id": id, "type": "message", "status": "completed", "role": "assistant", "content": []any{part}}
		add("response.output_item.done", map[string]any{"output_index": idx, "item": item})
		output = append(output, item)
		idx++
	}
	for i, c := range rep.Calls {
		callID := c.ID
		if callID == "" {
			callID = fmt.Sprintf("call_%d", i+1)
		}
		id := fmt.Sprintf("fc_fake_%d", i)
		item := func(status, args string) map[string]any {
			it := map[string]any{"id": id, "type": "function_call", "status": status, "call_id": callID, "name": c.Name, "arguments": args}
			if c.Namespace != "" {
				it["namespace"] = c.Namespace
			}
			return it
		}
		add("response.output_item.added", map[string]any{"output_index": idx, "item": item("in_progress", "")})
		frags := split(c.Args, 7)
		if rep.WholeArgs {
			frags = []string{c.Args}
		}
		for _, f := range frags {
			add("response.function_call_arguments.delta", map[string]any{"item_id": id, "output_index": idx, "delta": f})
		}
		add("response.function_call_arguments.done", map[string]any{"item_id": id, "output_index": idx, "arguments": c.Args})
		done := item("completed", c.Args)
		add("response.output_item.done", map[string]any{"output_index": idx, "item": done})
		output = append(output, done)
		idx++
	}
	final := resp("completed", output)
	if !rep.NoUsage {
		in, out, cached := usageOf(rep, req)
		final["usage"] = map[string]any{"input_tokens": in, "input_tokens_details": map[string]any{"cached_tokens": cached},
			"output_tokens": out, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": in + out}
	}
	add("response.completed", map[string]any{"response": final})
	if rep.ErrorAfter > 0 && rep.ErrorAfter < len(evs) {
		typ := rep.ErrorType
		if typ == "" {
			typ = "server_error"
		}
		evs = evs[:rep.ErrorAfter:rep.ErrorAfter]
		failed := resp("failed", []any{})
		failed["error"] = map[string]any{"code": typ, "message": rep.ErrorMessage}
		add("response.failed", map[string]any{"response": failed})
	}
	return evs
}

// responsesMessages reads a Responses request: instructions and
// system/developer messages are the system text (joined); user and
// assistant messages, function calls (with their Namespace) and their
// outputs are the messages, in order. Reasoning items are skipped.
func (r Request) responsesMessages() (system string, msgs []Msg) {
	var body struct {
		Instructions string          `json:"instructions"`
		Input        json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		return "", nil
	}
	var sys []string
	if body.Instructions != "" {
		sys = append(sys, body.Instructions)
	}
	var s string
	if json.Unmarshal(body.Input, &s) == nil {
		return strings.Join(sys, "\n"), []Msg{{Role: "user", Text: s}}
	}
	var items []struct {
		Type      string          `json:"type"`
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		CallID    string          `json:"call_id"`
		Name      string          `json:"name"`
		Namespace string          `json:"namespace"`
		Arguments string          `json:"arguments"`
		Output    json.RawMessage `json:"output"`
	}
	if err := json.Unmarshal(body.Input, &items); err != nil {
		return strings.Join(sys, "\n"), nil
	}
	for _, it := range items {
		switch {
		case it.Type == "function_call":
			c := Call{ID: it.CallID, Name: it.Name, Args: it.Arguments, Namespace: it.Namespace}
			if n := len(msgs); n > 0 && msgs[n-1].Role == "assistant" && msgs[n-1].Text == "" {
				msgs[n-1].Calls = append(msgs[n-1].Calls, c)
			} else {
				msgs = append(msgs, Msg{Role: "assistant", Calls: []Call{c}})
			}
		case it.Type == "function_call_output":
			msgs = append(msgs, Msg{Role: "tool", Text: textOf(it.Output), CallID: it.CallID})
		case it.Type == "message" || (it.Type == "" && it.Role != ""):
			if it.Role == "system" || it.Role == "developer" {
				sys = append(sys, textOf(it.Content))
				continue
			}
			msgs = append(msgs, Msg{Role: it.Role, Text: textOf(it.Content)})
		}
	}
	return strings.Join(sys, "\n"), msgs
}
