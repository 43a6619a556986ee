// Package daemon is warren's composition root: it owns the agents (tree,
// inboxes, sessions, logs), runs turns and tools, schedules wake turns,
// recovers everything from the event logs at start, and serves the RPC
// methods of the socket protocol.
//
// # State and the projection
//
// Every durable fact about an agent is an entry in its event log. The
// in-memory state that matters after a crash (name, parent, metadata, gates,
// subscriptions, reminders, pending messages, the latest run and its wait) is
// a projection of that log: one function, projection.apply, folds entries
// into it. The live path applies each entry right after its append is
// durable; recovery applies the same entries read back from disk. The two
// paths therefore cannot disagree, which is what the crash-recovery fuzzer
// checks.
//
// An entry whose append failed is not applied, so the state in memory never
// runs ahead of the log. A log that refuses appends after a failure
// (ENOSPC, EROFS, EMFILE, a failed fsync) reopens itself when the cause is
// gone (eventlog: "Faults and healing"); meanwhile its agent is degraded
// (agent.list, agent.inspect, daemon.status), operations that need the log
// fail with code 6, and a run whose end could not be logged stays open in
// the log until the end is written: when the log heals, before the agent's
// next turn, or by agent.cancel (degraded.go). Logs share a cap on open
// file handles (CoreOptions.MaxOpenLogs, eventlog.Files).
//
// The projection holds references rather than bulk: a pending message
// over 1 KiB keeps its envelope and its place in the log (inbox.Ref), not
// its payload, which is read back when a turn or a tool shows it
// (limits.go); the messages a tool call sent are references to that
// tool.call line. Pending messages are bounded per agent and in total
// (config.Limits).
//
// # Events written besides those fixed by the specification
//
//	tool.gate          child's log   action ("gate"/"ungate"), agent_name
//	tool.permit_turn   child's log   agent_name
//	tool.subscribe     subscriber's  subscription_id, target_id, from, to, once
//	tool.unsubscribe   subscriber's  subscription_id, reason
//	reminder.scheduled own           reminder_id, reason, due, every_ms
//	reminder.cancelled own           reminder_id
//
// tool.call entries also carry run_id and turn (so a re-run turn can answer
// recorded calls from the log) and, for tools that send messages, the
// envelopes sent ("messages"), so recovery can deliver a message that reached
// the sender's log but not the recipient's.
//
// # Agent processes and credentials
//
// procs.go gives every provider process an agent credential (in
// WARREN_AGENT_CREDENTIAL, held only in memory, revoked when the process is
// reaped) and records it in <home>/procs/<agent-id>.<pid>.json (format in
// package agentproc) before it gets any work; Recover kills the recorded
// groups that still run before anything else. agentauth.go serves socket
// requests that carry a credential: tool.call only, as a call of the
// agent's running turn (it joins the attempt's runTools, so it is logged,
// routed and replayed like the provider's own calls).
//
// # Message ids
//
// Inside a run, the id of a message sent by a tool call is derived from the
// run, the turn, the call's position and the recipient. A call executed again
// after a crash (before its tool.call was durable) produces the same id, and
// the recipient's enqueue is skipped because its log already has it: a
// message is enqueued once even when the call that sent it runs twice.
package daemon
