package llmfake

import (
	"fmt"
	"strings"
)

func model(req Request) string {
	if req.api == Gemini {
		// /v1beta/models/MODEL:streamGenerateContent
		_, rest, _ := strings.Cut(req.Path, "/models/")
		if m, _, _ := strings.Cut(rest, ":"); m != "" {
			return m
		}
	}
	if m, ok := req.JSON()["model"].(string); ok {
		return m
	}
	return "fake-model"
}

func usageOf(rep Reply, req Request) (in, out, cached int) {
	in, out, cached = rep.InputTokens, rep.OutputTokens, rep.CachedTokens
	if in == 0 {
		in = tokens(len(req.Body))
	}
	if out == 0 {
		n := len(rep.Text)
		for _, c := range rep.Calls {
			n += len(c.Args) + len(c.Name)
		}
		out = tokens(n)
	}
	return in, out, cached
}

// openAIEvents renders a reply as Chat Completions stream events.
func openAIEvents(rep Reply, req Request) []string {
	m := model(req)
	var evs []string
	add := func(v map[string]any) {
		v["id"], v["object"], v["created"], v["model"] = "chatcmpl-fake", "chat.completion.chunk", 1700000000, m
		evs = append(evs, "data: "+mustJSON(v)+"\n\n")
	}
	choice := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	add(choice(map[string]any{"role": "assistant", "content": ""}, nil))
	for _, t := range split(rep.Text, rep.Chunk) {
		// In OpenAI's own field order (most chunks of a stream are these).
		evs = append(evs, fmt.Sprintf(`data: {"id":"chatcmpl-fake","object":"chat.completion.chunk","created":1700000000,"model":%s,"choices":[{"index":0,"delta":{"content":%s},"logprobs":null,"finish_reason":null}]}`+"\n\n",
			mustJSON(m), mustJSON(t)))
	}
	for i, c := range rep.Calls {
		idx := i
		if rep.SameIndex {
			idx = 0
		}
		id := c.ID
		if id == "" {
			id = fmt.Sprintf("call_%d", i+1)
		}
		if rep.WholeArgs {
			add(choice(map[string]any{"tool_calls": []any{map[string]any{"index": idx, "id": id, "type": "function",
				"function": map[string]any{"name": c.Name, "arguments": c.Args}}}}, nil))
			continue
		}
		add(choice(map[string]any{"tool_calls": []any{map[string]any{"index": idx, "id": id, "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": ""}}}}, nil))
		for _, frag := range split(c.Args, 7) {
			add(choice(map[string]any{"tool_calls": []any{map[string]any{"index": idx, "function": map[string]any{"arguments": frag}}}}, nil))
		}
	}
	finish := "stop"
	if len(rep.Calls) > 0 && !rep.StopAsFinish {
		finish = "tool_calls"
	}
	add(choice(map[string]any{}, finish))
	if !rep.NoUsage {
		in, out, cached := usageOf(rep, req)
		add(map[string]any{"choices": []any{}, "usage": map[string]any{"prompt_tokens": in, "completion_tokens": out,
			"total_tokens": in + out, "prompt_tokens_details": map[string]any{"cached_tokens": cached}}})
	}
	if !rep.NoDone {
		evs = append(evs, "data: [DONE]\n\n")
	}
	if rep.ErrorAfter > 0 && rep.ErrorAfter < len(evs) {
		typ := rep.ErrorType
		if typ == "" {
			typ = "server_error"
		}
		evs = append(evs[:rep.ErrorAfter:rep.ErrorAfter], "data: "+mustJSON(map[string]any{"error": map[string]any{
			"message": rep.ErrorMessage, "type": typ, "code": typ}})+"\n\n")
	}
	return evs
}

// anthropicEvents renders a reply as Messages API stream events.
func anthropicEvents(rep Reply, req Request) []string {
	var evs []string
	add := func(typ string, v map[string]any) {
		v["type"] = typ
		evs = append(evs, "event: "+typ+"\ndata: "+mustJSON(v)+"\n\n")
	}
	in, out, cached := usageOf(rep, req)
	add("message_start", map[string]any{"message": map[string]any{"id": "msg_fake", "type": "message", "role": "assistant",
		"model": model(req), "content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": in - cached - rep.CacheWriteTokens, "output_tokens": 1,
			"cache_creation_input_tokens": rep.CacheWriteTokens, "cache_read_input_tokens": cached}}})
	idx := 0
	if rep.Text != "" {
		add("content_block_start", map[string]any{"index": idx, "content_block": map[string]any{"type": "text", "text": ""}})
		add("ping", map[string]any{})
		for _, t := range split(rep.Text, rep.Chunk) {
			// In the API's own field order (most events of a stream are these).
			evs = append(evs, fmt.Sprintf("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":%d,\"delta\":{\"type\":\"text_delta\",\"text\":%s}}\n\n",
				idx, mustJSON(t)))
		}
		add("content_block_stop", map[string]any{"index": idx})
		idx++
	}
	for i, c := range rep.Calls {
		id := c.ID
		if id == "" {
			id = fmt.Sprintf("toolu_%02d", i+1)
		}
		add("content_block_start", map[string]any{"index": idx, "content_block": map[string]any{"type": "tool_use", "id": id, "name": c.Name, "input": map[string]any{}}})
		frags := split(c.Args, 7)
		if rep.WholeArgs {
			frags = []string{c.Args}
		}
		for _, f := range frags {
			add("content_block_delta", map[string]any{"index": idx, "delta": map[string]any{"type": "input_json_delta", "partial_json": f}})
		}
		add("content_block_stop", map[string]any{"index": idx})
		idx++
	}
	stop := "end_turn"
	if len(rep.Calls) > 0 {
		stop = "tool_use"
	}
	add("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": out}})
	add("message_stop", map[string]any{})
	if rep.ErrorAfter > 0 && rep.ErrorAfter < len(evs) {
		typ := rep.ErrorType
		if typ == "" {
			typ = "overloaded_error"
		}
		evs = evs[:rep.ErrorAfter:rep.ErrorAfter]
		add("error", map[string]any{"error": map[string]any{"type": typ, "message": rep.ErrorMessage}})
	}
	return evs
}
