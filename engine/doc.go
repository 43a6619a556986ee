// Package engine is warren's agent engine, the Core: it owns the agents
// (tree, inboxes, sessions, logs), runs turns (the tools run in package
// toolexec against the Core as their environment, toolenv.go), schedules
// wake turns, reminders and wait deadlines (the waits and resumes are
// decided in package waits against the agent's record, waits.go), and
// recovers everything from the event logs at start. Package daemon serves
// it over the socket; the Core's exported methods (api.go, views.go)
// return typed views and domain errors (errors.go, package domainerr),
// which the daemon maps to the wire. The views are built by
// package views from snapshots the agent's record copies under its lock
// (views.go).
//
// # State and the projection
//
// Every durable fact about an agent is an entry in its event log. The
// in-memory state that matters after a crash (name, parent, metadata, gates,
// subscriptions, reminders, pending messages, the latest run and its wait) is
// a projection of that log: package projection's State.Apply folds entries
// into it (no locks, no I/O there; the agent's record, package agentrec,
// guards its State under its lock). The live path applies each entry
// right after its append is durable; recovery applies the same entries
// read back from disk. The two paths therefore cannot disagree, which is
// what the crash-recovery fuzzer checks.
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
// # Checkpoints
//
// Folding every line of every log at start-up costs time in proportion to
// the whole history (10,000 agents x 1,000 events is 3.7 GB). So each agent
// directory may hold checkpoint.json, the projection folded up to one line
// of the log (format in package checkpoint).
//
// Recovery reads the checkpoint, checks its sum, and opens the log with
// eventlog.Options.Resume: Open checks that line N is at that offset with
// that seq and crc, folds only the lines after it, and applies the
// torn-tail and pending-file rules to them as it would to a whole log. The
// pending messages are read back from their lines. Anything that does not
// check out (no file, a bad sum, another version, a line that is not
// there, a pending message that cannot be read) makes recovery fold the
// whole log instead, so a checkpoint is an optimisation and never the
// authority: it is written without fsync (a temp file and a rename) and a
// crash that tears it costs one full fold.
//
// The lines before N are verified after recovery by a scrub (one log at a
// time, in the background) and, at the latest, before the first append to
// the log (eventlog.Log.VerifyPrefix), so nothing is appended on top of
// damage: an agent whose earlier lines fail is listed corrupt, as a full
// fold would have listed it, and its checkpoint is removed. Line N itself
// is read whole at start when it is short; a line of 64 KiB or more (a
// big message waiting for a gated agent) is checked at start by its ends
// only (its seq, its crc field and its newline, at the length the
// checkpoint records), and whole by the scrub, so that a start does not
// read every such line: damage inside it makes the agent corrupt once the
// scrub reaches it, instead of at start.
//
// A checkpoint is written SessionSaveDelay after the agent's log has grown
// since its last one (a scheduler timer, one at a time per agent:
// ckptwrite.Writer.Soon): by any entry while the agent is at rest (a message to a
// gated agent included), by CoreOptions.CheckpointEvery entries (the
// daemon's config.DefaultCheckpointEvery, 256) while it runs a turn, and once more when a turn ends, since its
// last entries were logged while it was busy; the timer writes at the
// log's end whatever the agent does by then. Also after recovery for every
// log it folded lines of, and at Close for every log that grew at all. So
// a kill -9 leaves to fold, in any log, what it grew by in the last delay,
// and in the logs of the turns running fewer than CheckpointEvery more. In memory the same
// compact forms are used: message ids in a sorted array of 16-byte values,
// sent messages as ids and the offset of their tool.call line (the envelope
// is read back only to redeliver it), and recorded tool calls only while
// their run is open.
//
// # Goroutines and locks
//
// Code of this package runs on RPC goroutines (the exported methods),
// turn goroutines (runTurn through the scheduler's Go: package turnrun's
// steps through turnAgent, turn.go), timer callbacks of c.sched
// (wait deadlines, reminders, the sweep, checkpoints), log commits
// (OnAppend, create.go: the fold into the agent's record, then the bus)
// and helpers the Core owns (the session.json writers, the recovery
// loaders and the scrub, the lease watches). The agent table (c.agents,
// package roster) guards, under its lock, the agents, the tree's changes
// that go with them, the subscription index, the gone registry,
// quarantine, recovering and closed; the config in force is an atomic
// pointer; each agent's state is its record's (package agentrec), under
// the record's own lock, which only the record's methods take. The
// roster's lock and a record's are never held together. Package agentrec's doc says which goroutine
// touches what and writes the whole lock order, in one place.
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
// Package launch gives every provider process an agent credential (in
// WARREN_AGENT_CREDENTIAL, held only in memory, revoked when the process is
// reaped) and records it in <home>/procs/<agent-id>.<pid>.json (format in
// package agentproc) before it gets any work; Recover kills the recorded
// groups that still run before anything else. Socket requests that carry
// a credential (daemon/rpc_agent.go) may only call a tool, as a call of the
// agent's running turn: CallToolInTurn (agentauth.go) joins the attempt's
// toolexec.Attempt, so it is logged, routed and replayed like the
// provider's own calls.
//
// What agent processes write to stderr goes, through provider.Launch.Stderr,
// to <home>/agents/<id>/stderr.log (package stderrlog): plain bytes as written,
// one file shared by the agent's processes, opened with O_NOFOLLOW through
// faultfs, never synced (a diagnostic, not state: nothing reads it back but
// `warren logs --stderr`). A write that would take it past 1 MiB first
// renames it to stderr.log.1 (replacing the older one); a single write over
// 1 MiB keeps its last 1 MiB.
//
// # Message ids
//
// Inside a run, the id of a message sent by a tool call is derived from the
// run, the turn, the call's position and the recipient. A call executed again
// after a crash (before its tool.call was durable) produces the same id, and
// the recipient's enqueue is skipped because its log already has it: a
// message is enqueued once even when the call that sent it runs twice.
package engine
