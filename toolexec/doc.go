// Package toolexec runs warren's agent tools (SPEC 6): the implementation
// of every tool in package tools' catalog, written against Env, the small
// set of things a tool needs from the daemon's core (look up an agent or
// a name, check a route, check and enqueue a message, append an entry,
// the clock, ids). The engine's Core implements Env (engine/toolenv.go);
// tests use a fake, so each tool is tested without a Core.
//
// # The one door
//
// Every tool call goes through this package, whoever makes it:
//
//   - a provider, during a turn, through the attempt's Attempt (it is the
//     provider.ToolCaller and provider.BatchToolCaller of the attempt);
//   - the MCP bridge of an agent CLI (warren mcp-bridge), through the
//     socket's tool.call with the agent's credential, which the daemon
//     joins to the same Attempt (engine/agentauth.go);
//   - the operator's tool.call outside any turn, through CallOutside.
//
// A call is parsed (tools.Parse, typed calls), executed (Exec: one method
// per tool, returning an Outcome built with the catalog's result
// builders), then logged as a tool.call entry (schema.ToolCallData) in
// the caller's log while the messages it sent are logged in their
// recipients' logs; it is answered once all are durable. A tool-level failure (bad argument,
// routing refused, not found, a limit) is a normal result {"error": ...};
// an error return means the call itself failed (a log write, or the run
// suspended by await_input).
//
// # Positions, derived ids and replay
//
// Inside a run a call has a position (Pos: run, turn, index). The ids of
// its effects (messages, children, reminders, subscriptions) derive from
// the position, so a call made again after a crash produces the same ids
// and a recipient that already has a message does not get it twice. An
// Attempt answers the calls the log already records for the run, at the
// same position and with the same tool, from the record (Recorded), and
// redoes only their idempotent effects.
//
// # Entries written behind
//
// Inside a turn the tool.call entry of send_message and broadcast is
// written behind the call (calllog.go); every other tool, a step of calls
// made together (batch.go) and the end of the attempt (Attempt.Drain) wait
// for those entries, so a run's calls are in the log in call order and
// before the entry that ends the turn.
//
// # Concurrency
//
// Package functions hold no state. An Attempt runs one call at a time
// (its serial lock is held across the Env calls of a call, so a call that
// arrives over the socket waits for the provider's); its other locks are
// never held across an Env call.
package toolexec
