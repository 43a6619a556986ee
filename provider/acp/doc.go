// Package acp is the provider type "acp": an agent CLI (Claude Code and
// Codex through their ACP adapters, gemini --acp, opencode acp, ...)
// driven over the Agent Client Protocol, JSON-RPC 2.0 with one object per
// line on the agent process's stdio (SPEC 7).
//
// The client is hand-written (docs/DECISIONS.md, "ACP provider"). It uses:
//
//	initialize {protocolVersion:1, clientCapabilities:{fs:{false,false}, terminal:false}}
//	session/new {cwd, mcpServers:[warren]}        -> {sessionId, modes}
//	session/resume | session/load {sessionId, cwd, mcpServers}
//	session/set_mode {sessionId, modeId}          (when the entry sets "mode")
//	session/prompt {sessionId, prompt:[{type:text}]} -> {stopReason, usage}
//	session/cancel {sessionId}                    (notification)
//
// and serves session/update notifications (agent_message_chunk text is the
// turn's streamed output; every other update is observed only) and
// session/request_permission (answered by the entry's "permissions"
// policy). Every other agent request (fs/*, terminal/*, anything else) is
// refused with -32601.
//
// warren's MCP server: session/new and the restore carry
// {"name":"warren","command":<warren binary>,"args":["mcp-bridge"],
// "env":[{"name":"WARREN_SOCKET",...},{"name":"WARREN_AGENT_CREDENTIAL",...}]}:
// the bridge runs warren's tools as calls of the agent's running turn.
//
// Sessions: the ACP session id is the native resume handle. Restore starts
// the agent and uses session/resume when initialize advertises
// agentCapabilities.sessionCapabilities.resume, else session/load; the
// updates a load replays (before or after its answer) are discarded until
// the next session/prompt. Any JSON-RPC error answering the restore is
// provider.ErrCannotRestore (the daemon starts a fresh session with the
// history injected); an agent that dies or hangs is a transient error. The
// session says which method restored it (provider.RestoredBy), logged in
// session.restored.
//
// Processes: the agent runs in the agent's working directory, as the
// leader of its own process group (agentproc), with the allow-listed
// environment plus the entry's and the daemon's variables; its stderr goes
// to the Launch's Stderr writer when it has one, and its tail into error
// texts. Stop closes stdin, waits StopGrace, then kills the group. A turn
// whose agent died restarts it and restores the session before prompting.
//
// Cancel: a cancelled context (agent cancel, a suspension, the daemon's
// turn timeout), the entry's timeout_s or a flood sends session/cancel,
// answers open permission requests "cancelled", and waits CancelGrace for
// the prompt's answer; without one the process group is killed.
//
// Bounds: a turn's text by Settings.MaxText (the daemon's
// limits.message_bytes; past it the agent is cancelled and the turn fails,
// permanent, ErrResponseTooLong) and Options.MaxTurnOutput, its updates by
// MaxTurnUpdates (ErrFlood), a line by MaxLine; a session id by
// MaxSessionID (256 bytes: a longer one is refused at session/new, and
// never restored); an agent's error message is quoted up to 4 KiB.
//
// Permissions: "allow" and "deny" pick the agent's allow_once/reject_once
// option; requests for warren's own tools are always allowed, since
// warren's rules govern them. They are recognised by the structure each
// adapter builds from the MCP tool's registration, never by a title alone
// (warrentool.go). "ask" (the default) calls await_input with kind
// "permission" through the turn's ToolCaller: the run suspends as for any
// await_input (a token, warren waits, agent resume). The re-run after the
// operator's answer (in a fresh process, the session restored) repeats the
// prompt; the agent asks again, and the same await_input call at the same
// position is answered from the log with the operator's response: "allow"
// (yes, ok, approve) selects allow_once, "always" allow_always, anything
// else rejects. A daemon restart while waiting changes nothing: the wait
// and its token are in the log.
//
// A failed model request that the agent reports as text rather than as an
// error (codex-acp: threadStatus systemError, then end_turn) is a turn
// error, transient for overloads and rate limits (codexerr.go); so is a
// prompt answered with an HTTP status as the error code (Gemini's 429 and
// 5xx).
package acp
