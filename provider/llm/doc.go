// Package llm is the shared engine of warren's HTTP LLM providers (types
// "openai" and "anthropic", SPEC 7): one Provider per provider entry, one
// session per agent, the tool loop, the history as native messages, the
// prompt-prefix cache, the context budget, and the classification of every
// failure as a provider.Error. The wire formats live in provider/openai and
// provider/anthropic (llm.Wire); everything here is wire-independent and
// uses only net/http.
//
// # The tool loop (Session.Send)
//
// A turn is a sequence of model steps. Each step is one POST with the whole
// conversation, streamed back; text deltas go to TurnIO.OnChunk as they
// arrive and the usage of each request to TurnIO.OnUsage. A step that makes
// tool calls:
//
//  1. checks every call: an unknown tool name, arguments that are not a
//     JSON object, or arguments over the message limit (dropped as they
//     arrived), is answered with a tool error ({"error": "..."}) that never
//     echoes the arguments, and never run (no partial call is ever
//     executed);
//  2. runs the valid calls of the step together, in step order, through
//     provider.BatchToolCaller (CallTool one by one when the caller is not a
//     batch caller), so the daemon logs each as tool.call and answers a
//     re-run's calls from the log;
//  3. sends the results back by call id in the next request (a tool-level
//     failure is is_error on Anthropic, {"error": ...} content on OpenAI).
//
// The turn ends with the first step that makes no tool call; its text is the
// turn's response. A call answered with an error wrapping
// provider.ErrRunSuspended ends the turn at once (Send returns that error).
// MaxSteps (default 100) bounds a runaway loop (permanent error). Only a
// successful turn joins the session's transcript: a failed, cancelled or
// suspended turn leaves it as it was (the incomplete turn is rolled back).
//
// # History shape
//
// Within a live session the transcript is exactly what was sent and
// received: user message; per step an assistant message (its text and tool
// calls, with the server's call ids) and the tool results; the final
// assistant text. A session created or restored by the daemon (after an
// eviction, a restart, or a switch to another entry) gets the completed
// turns from the event log (provider.Spec.History) and renders each as:
//
//	user: <turn message>
//	assistant: tool calls [call_<call_id>, ...]      (when the turn made calls)
//	tool results, by id, in call order               (same)
//	assistant: <turn response>                       (when not empty)
//
// The ids are derived from the log's call_id (HistoryCallID), so every
// request of every provider type carries the same id for a recorded call;
// text a model wrote between steps is not in the log and is not replayed.
// Nothing is kept in a suspend blob: the log is the transcript.
//
// # Prompt-prefix stability
//
// A request body is the head (model, stream options, tools, then the system
// prompt; fixed key order, messages last), the messages, and "]}". Each
// message is encoded once, when it first goes out, and its bytes are reused
// by every later request of the session; a request is sent from the cached
// slices without copying them into one buffer. So request N+1 begins with
// request N's bytes up to its closing "]}", provider-side prompt caches hit,
// and the bytes encoded per request grow only with the new messages
// (BenchmarkProvider in provider/openai measures both). Anthropic's moving
// cache_control breakpoint on the last message is the one message encoded
// again per request.
//
// # Limits: every byte from the server is bounded
//
// Settings.MessageBytes (config limits.message_bytes, 1 MiB by default)
// bounds the text of one model step (the turn's response is its last
// step's text): past it the wire stops reading and the turn fails with a
// permanent error wrapping ErrResponseTooLong that names the setting. It
// bounds one tool call's arguments too: past it they are dropped as they
// arrive (Call.ArgsBytes keeps their size), the call is refused with a
// short tool error, and the transcript keeps {} in their place. The
// arguments of a call of an unknown tool are kept only up to 4 KiB (else
// {}); a call id over 256 bytes is replaced, a tool name over 256 bytes cut.
// Settings.TurnBytes (config limits.turn_transcript_bytes, 32 MiB by
// default) bounds the turn in progress: its own messages (the steps' text,
// tool calls and results), which every step sends again and the context
// budget does not cut; when they pass it, the turn fails (permanent,
// ErrTurnTooLarge, naming the setting) before the next request is built.
// A line of the stream is bounded by Options.MaxLine, a response by
// Options.MaxResponse, an error body by 64 KiB; the session's stream
// reader lets go of a buffer a long line grew when the turn ends. So what
// one turn holds does not grow with its steps times the size of what the
// server sends (BenchmarkHostileTurnMemory).
//
// # Context budget
//
// Settings.ContextBudget (config: providers.<entry>.context_budget) is an
// estimate in tokens, at BytesPerToken (4) bytes per token of the encoded
// request. When a request would exceed it, the oldest completed turns are
// left out of the requests (never out of the log) until the estimate is at
// most half the budget, and one user message stands in for them ("[Note
// from warren: the N oldest turns ... are left out here to fit the context
// budget ...]"). The cut only moves when the budget is exceeded again, so
// the prefix stays stable (and cached) for many turns between cuts. A
// server's own "context length exceeded" error is permanent and names the
// setting to lower.
//
// # Errors
//
// Send never retries: every failure is returned as a provider.Error for the
// daemon's retry loop (one attempt = one logged attempt). Transient:
// connection errors, the idle timeout (Settings.Timeout: no byte for that
// long, waiting for headers or inside the stream), a stream that ends before
// its end marker, HTTP 408, 409, 429, 5xx and 529, and error objects or
// events after HTTP 200 whose type or code says overloaded, rate limit or
// server error. Permanent: other 4xx (with a hint for 401/403 naming the key
// variable), a quota error (even on 429), a redirect (never followed: a key
// must not follow it), malformed responses (not an event stream, HTML, JSON
// that does not decode, a line over MaxLine, a response over MaxResponse),
// a missing key (naming its variable). RetryAfter reads retry-after-ms, then
// Retry-After in seconds or as an HTTP date (capped at MaxRetryAfter);
// x-should-retry overrides the status. A cancelled ctx closes the stream at
// once and returns an error wrapping ctx.Err() (not a provider.Error).
// Error texts name the entry, its base URL, the HTTP status and the server's
// own message.
//
// # Keys never leave through the server
//
// A server may echo the key it received anywhere: its status line's reason
// phrase, a header (a redirect's Location), an HTML page, an error object's
// type or code, an error event, the streamed text, a tool call's
// arguments. post is the one place what the server sent leaves the request
// exchange, and all of it (the error, the step's text and calls, the
// streamed deltas) passes the key's redactor (redact.go): every run that
// stands for 8 or more consecutive characters of the key (so a key cut by a
// snippet bound is caught too), raw, JSON-escaped at any depth,
// percent-encoded or as HTML character references, becomes "[key]"
// (a key under 8 bytes is redacted only whole). A redacted error keeps its
// class, its Retry-After and the sentinels it wrapped, and nothing that
// unwraps from it holds the server's text. Streamed text holds back a tail
// that may begin a key run until the next delta shows whether it does.
// FuzzKeyNeverLeaks plants the key in every field and header of every
// response shape.
//
// # Keys and connections
//
// The key is read from the daemon's environment by the entry's variable
// (Options.Getenv) for every request, sent only in the request to the
// entry's base URL, and kept nowhere else. Each entry has its own HTTP
// client with a keep-alive pool, a connect timeout, no redirects, and a
// proxy from HTTPS_PROXY for https base URLs only (through a CONNECT tunnel
// the key stays encrypted to the entry's host).
package llm
