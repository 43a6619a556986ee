// Package anthropic is the wire format of provider type "anthropic": the
// Anthropic Messages API. The engine (tool loop, history, caching, errors)
// is provider/llm.
//
// Request: POST {base_url}/v1/messages with x-api-key and
// anthropic-version: 2023-06-01, body (keys in this order, messages last):
//
//	{"model":M,"max_tokens":N (default 8192),"stream":true,
//	 "system":[{"type":"text","text":S,"cache_control":{"type":"ephemeral"}}],
//	 "tools":[{"name","description","input_schema"}..., the last with cache_control],
//	 "messages":[{"role":"user","content":[{"type":"text","text":T}]},
//	             {"role":"assistant","content":[{"type":"text",..},{"type":"tool_use","id","name","input":{..}}]},
//	             {"role":"user","content":[{"type":"tool_result","tool_use_id":ID,"content":JSON or error text,"is_error":true?}]}, ...]}
//
// Prompt caching: three breakpoints (the system block, the last tool, the
// last block of the request's last message, which moves with each request).
// Usage: input_tokens is reported as the whole input (input_tokens +
// cache_read_input_tokens + cache_creation_input_tokens), cached input as
// cache_read_input_tokens.
//
// Response events: message_start (usage), content_block_start (text,
// tool_use; other block types are read and dropped), content_block_delta
// (text_delta, input_json_delta; a tool_use input is its joined
// partial_json, else the start block's input), content_block_stop,
// message_delta (stop_reason, output usage), message_stop (the end: a
// stream without it is cut, transient), ping, error (after HTTP 200:
// overloaded_error, rate_limit_error and api_error are transient, others
// permanent), and unknown events (ignored).
package anthropic
