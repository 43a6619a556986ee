// Package openai is the wire format of provider type "openai": the OpenAI
// Chat Completions API as OpenAI, vLLM, llama.cpp server, Ollama, LM Studio,
// OpenRouter, Groq and other compatible servers speak it. The engine (tool
// loop, history, caching, errors) is provider/llm.
//
// Request: POST {base_url}/chat/completions, Authorization: Bearer KEY when
// the entry has a key, body (keys in this order, messages last):
//
//	{"model":M,"stream":true,"stream_options":{"include_usage":true},
//	 "max_tokens":N (only when set),
//	 "tools":[{"type":"function","function":{"name","description","parameters"}}...],
//	 "messages":[{"role":"system","content":S},
//	             {"role":"user","content":T},
//	             {"role":"assistant","content":T|null,"tool_calls":[{"id","type":"function","function":{"name","arguments"}}]},
//	             {"role":"tool","tool_call_id":ID,"content":JSON}, ...]}
//
// Response: server-sent events "data: {chunk}" ending with "data: [DONE]".
// The reader accepts: tool-call arguments fragmented and joined by index,
// or whole in one chunk (Ollama); parallel calls that all claim index 0 (a
// fragment with a new id starts a new call); arguments sent as an object;
// comment lines (": OPENROUTER PROCESSING"); a usage chunk with empty
// choices (prompt_tokens, completion_tokens, prompt_tokens_details.
// cached_tokens); an {"error": ...} object mid-stream, with a string or
// numeric code; EOF without [DONE] after a finish_reason (EOF before one is
// a cut stream, transient). Whether the model called tools is decided from
// the calls, not finish_reason (some servers say "stop").
package openai
