// Package mcpbridge is `warren mcp-bridge` (SPEC 7, type acp): a Model
// Context Protocol server on stdio that gives an agent CLI (Claude Code,
// Codex, Gemini CLI, OpenCode, started by the acp provider) warren's agent
// tools. Each tools/call becomes a socket tool.call made with the agent's
// credential, so it runs as a call of the agent's running turn: logged as
// tool.call, routed, subject to the routing rules, and answered from the
// log when the run is re-run. The bridge keeps no state of its own.
//
// # Environment
//
// The agent CLI starts the bridge with the environment the acp provider
// put in the mcpServers entry it sent in session/new and session/load:
//
//	WARREN_SOCKET            the daemon's socket (else <home>/daemon.sock)
//	WARREN_AGENT_CREDENTIAL  the credential of the agent process (required
//	                         for tools/call; see engine/agentauth.go)
//	WARREN_AGENT_ID          optional: the agent the credential must belong
//	                         to (sent as agent_id; the daemon checks it)
//
// Nothing else is needed: with WARREN_SOCKET set, `warren mcp-bridge`
// looks for no home (an agent CLI may start it with only these variables,
// without $HOME).
//
// # Wire format (MCP stdio transport)
//
// One JSON-RPC 2.0 message per line on stdin and stdout, UTF-8, no
// embedded newlines; nothing but messages is ever written to stdout (logs
// go to stderr). Empty lines are ignored. Served methods:
//
//	initialize {protocolVersion, capabilities, clientInfo}
//	    -> {protocolVersion, capabilities:{tools:{listChanged:false}},
//	        serverInfo:{name:"warren", version}, instructions}
//	    protocolVersion: the client's if it is one of SupportedVersions
//	    (2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05), else the latest.
//	notifications/initialized          (no reply)
//	ping -> {}
//	tools/list -> {tools:[{name, description, inputSchema}]}  (the catalog
//	    of package tools, in its order; no pagination)
//	tools/call {name, arguments?, _meta?}
//	    -> {content:[{type:"text", text:<the result as JSON>}],
//	        structuredContent:<the result>, isError:<bool>}
//	    structuredContent only from protocol version 2025-06-18 on.
//	    isError is true when the tool failed at tool level (warren's result
//	    {"error": "<text>"}, e.g. a routing violation or a bad parameter):
//	    that is a normal result the model reads, logged like any call.
//	notifications/cancelled {requestId}  cancels that tools/call (a cancel
//	    frame to the daemon); no reply is sent for a cancelled request.
//
// Any other request gets -32601 (method not found), e.g. Claude Code's
// server/discover probe; any other notification is ignored. Requests are
// served before initialize too (clients that skip it still work).
//
// Errors (JSON-RPC error objects; "data" carries the details):
//
//	-32700 parse error: the line is not JSON (id null)
//	-32600 invalid request: not a JSON-RPC 2.0 request object, a batch
//	       (arrays were dropped from MCP in 2025-06-18), a null id, or a
//	       line longer than the limit (the id is recovered from the line's
//	       start when it precedes the params)
//	-32602 invalid params: missing name, arguments not an object, an
//	       unknown tool (tools/list names them), arguments nested too deep
//	-32603 internal: too many tool calls queued
//	-32000 the daemon refused the call: data {warren_code, warren_error}
//	       with the daemon's code (SPEC 8.1). The three refusals of a
//	       credential call are told apart: the agent has no running turn
//	       (code 2, "has no running turn"), the agent is unknown (code 1,
//	       "not found"), the credential is unknown or revoked (code 5: its
//	       process ended or the daemon restarted). Code 6 says the call
//	       did not complete: the turn ended during it (await_input began
//	       a wait, a cancel or a timeout) or the daemon is stopping.
//	-32001 the daemon cannot be reached or the bridge has no credential:
//	       the socket is missing or refuses, the connection broke during
//	       the call (data.outcome "unknown": the call may have run; the
//	       agent's log says), or WARREN_AGENT_CREDENTIAL is not set.
//
// Tool calls are sent to the daemon one at a time, in the order their
// requests arrived (the daemon numbers a turn's calls by arrival and the
// replay of a re-run matches them by position), on a fresh connection per
// call; ping and cancellation are answered while a call runs. A line is at
// most Options.MaxLine bytes (default DefaultMaxLine: the daemon's 16 MiB
// frame limit less 64 KiB for the request around the arguments). Arguments
// over the daemon's message limit (limits.message_bytes) are refused by the
// daemon as a tool-level error naming the parameter and the limit. At the
// end of stdin the calls already received are run and answered, then Serve
// returns; the context's end (SIGTERM, SIGINT) or a failed write cancels
// them instead.
package mcpbridge
