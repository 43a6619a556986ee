// Package engine is warren's agent engine, the Core: it owns the agents
// (tree, inboxes, sessions, logs), runs turns (the tools run in package
// toolexec against the Core as their environment, toolenv.go), schedules
// wake turns, reminders and wait deadlines (the waits and resumes are
// decided in package waits against the agent's record, waits.go), and
// recovers everything from the event logs at start. Package daemon serves
// it over the socket; the Core's exported methods (api.go, api_edge.go,
// views.go) return typed views and domain errors (errors.go), which the
// daemon maps to the wire. The views are built by package views from
// snapshots the Core copies under an agent's lock (views.go).
//
// # State and the projection
//
// Every durable fact about an agent is an entry in its event log. The
// in-memory state that matters after a crash (name, parent, metadata, gates,
// subscriptions, reminders, pending messages, the latest run and its wait) is
// a projection of that log: package projection's State.Apply folds entries
// into it (no locks, no I/O there; the agent's lock guards its State). The live path applies each entry right after its append is
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
// checkpointSoon): by any entry while the agent is at rest (a message to a
// gated agent included), by CoreOptions.CheckpointEvery entries (256 by
// default) while it runs a turn, and once more when a turn ends, since its
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
// # Goroutines
//
// Code of this package runs on five kinds of goroutine:
//
//   - RPC goroutines (package server, one per request, in package
//     daemon): the exported methods. Send and Resume start a turn and wait
//     for its result; tool.call with an agent credential (agentauth.go)
//     runs its tool here, joined to the running turn's toolexec.Attempt
//     through the attempt's extcall.Door.
//   - Turn goroutines, started by wake (wake.go), Send and Resume through
//     the scheduler's Go (c.sched, package schedule): runTurn (package
//     turnrun's steps, through turnAgent, turn_host.go), the provider's
//     Run and the tool calls the provider makes during it, then the
//     aftermath (deferred spawns, notices, the next wake).
//   - Timer callbacks of c.sched (wait deadlines, reminders, the periodic
//     sweep): on the real clock a fresh goroutine per firing, on a
//     schedule.Fake the goroutine that advances it (docs/ENGINEERING.md,
//     "Time in the daemon").
//   - Log commits: eventlog's OnAppend (openLogReplay, create.go) runs on
//     the goroutine that commits a group of appends, after the entries are
//     durable: it folds them into the agent's projection (a.mu) and
//     publishes them on the bus.
//   - Helpers owned by the Core: the session.json writers (c.snaps,
//     package snapsave; Close waits for them), the checkpoint timers
//     (c.sched, checkpointSoon), the recovery
//     loaders (agentload.Loader.LoadAll, joined before it returns) and the
//     scrub (c.sched), the lease watches of a cluster store (c.claims,
//     package claims, ended by c.ctx).
//
// # Locks
//
// The order, outermost first (on each line a lock is taken only while
// holding those to its left; "|" separates locks taken one after the
// other, never together):
//
//	toolexec Attempt.serial -> a.remMu -> c.mu | a.mu | a log append
//	a.owed's flush lock -> c.mu | a.mu | a log append
//	a.ckptMu -> a.mu
//	c.resv's lock (reserve.Set) -> c.mu | a.mu | the USER inbox's lock
//	token entry lock (the commit of token.Service's Consume, Revoke, Expire) -> c.mu | a.mu | a log append | a.resumes's lock
//	log commit (eventlog) -> a.mu, then bus.mu -> c.mu, then a.resumes's lock (the resume secret)
//	c.mu -> c.sched's mutex        a.mu -> c.sched's mutex
//	a.mu -> a.snap's lock, a.owed's lock, a.resumes's lock (leaves)
//	a.snap's write lock -> a.snap's lock
//
// c.mu (the agents, the tree's companions, the config, the subscription
// index, closed) and an agent's a.mu (its projection and live flags) are
// never held together: code takes one, copies what it needs, releases it,
// then takes the other. Neither is held across a log append (the commit
// takes a.mu to fold the entry and the bus takes c.mu, then a.resumes's
// lock, to find a secret),
// a provider call, a wake or a call into another package that may call
// back. a.remMu (package reminders) serialises firing and cancelling one
// agent's reminders and is held across the append that records it; a.owed (package owed) holds
// its flush lock across writing an owed run end and its aftermath
// (degraded.go); a.ckptMu serialises the checkpoint writes of one agent,
// taking a.mu briefly to copy the state; a.snap (package snapsave)
// serialises the session.json writes of one agent with its write lock and
// guards the snapshot with a leaf lock of its own, which status reads
// under a.mu; a.resumes (package waits) guards the secrets minted in the
// agent's runs and the results a repeated resume shares with a leaf lock,
// taken under a.mu when a turn's result hands the secret out and under
// bus.mu when the live run.waiting event shows it; c.resv (package
// reserve) holds its lock across a send's check, which reads the
// recipient's inbox. The leaves: c.claims's mutex
// (package claims; held across a claim request to the store), a.cursors's
// (package logpage), the USER inbox's mutex (user.go), an attempt's
// door for joined calls (package extcall, agentauth.go), and the mutexes inside tree, inbox,
// token, multiplexer, bus, launch, registry and stderrlog, none of which
// calls back into the engine while holding its own. c.gone (package gone)
// and c.subIndex (package subs) have no lock: c.mu guards them.
//
// Each package the engine's state was split into documents its own locks
// in its package doc (agentload, claims, extcall, gone, lifecycle, logpage, owed,
// recoverrun, reminders, reserve, snapsave, subs, waits; turnrun and views take none: the Core reads an
// agent's snapshot under a.mu and builds its views after releasing it;
// gate and mail take none: their steps call the Core, mailenv.go, one lock at a time);
// this section is the one place their order is written.
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
