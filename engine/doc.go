// Package engine is warren's agent engine, the Core: it owns the agents
// (tree, inboxes, sessions, logs), runs their turns and their tools,
// schedules wake turns, reminders and wait deadlines, and recovers
// everything from the event logs at start. Package daemon serves it over
// the socket; the Core's exported methods return typed views and the
// error conditions of errors.go, which the daemon maps to the wire.
//
// # One file per concept
//
// The record of one agent and the procedures that run on it are in this
// one package, a file (or a few, named after it) per concept:
//
//	core.go            the Core, its options, Close
//	agent*.go          the record of one agent: its log, its projection, the
//	                   state of this process, under its lock (stateMu)
//	roster.go          the table of agents, the tree's changes made with it
//	create.go          an agent's creation; spawn.go: children spawned by a
//	                   turn, bootstrap turns; terminate.go: termination, reset
//	turn.go            a turn's steps; attempt.go: its attempts and retries
//	tools*.go          the agent tools, an attempt's tool calls and replay
//	mail.go            a message to an inbox; subscriptions.go, reminders.go,
//	                   gate.go, limits.go, reserve.go, wake.go: what decides
//	                   when and whether an agent takes a turn
//	waits.go           await_input, deadlines; resume.go: resume, re-run,
//	                   cancel
//	sessions.go        the live provider sessions in their pool slots, and
//	                   how one that is not live comes back
//	recovery.go        recovery at start as plain steps; load.go: one agent
//	                   read back; takeover.go: the cluster's takeover scan
//	snapshots.go       session.json behind the log; ckptwrite.go: checkpoints,
//	                   ckptstore.go: where they live (files, or the cluster's);
//	                   owed.go: a run end that could not be logged
//	views*.go          what the API shows (agent.list, inspect, waits)
//	workspaces.go      an agent's git worktree, snapshots and restores;
//	                   workspaces_away.go: the worktree lent to a worker
//	sandboxes.go       who runs under bubblewrap, the private home
//	usage.go           usage.step per model request, spend per subtree;
//	                   budgets.go: budgets, grants and the budget wait
//	user.go, gone.go, logpage.go, agentauth.go, calldoor.go, degraded.go,
//	providers.go, store.go, errors.go
//
// The packages under engine/internal own no engine state and decide
// without it: placement (recovery's classification and order of the
// agents read back, as pure functions), notice (SYSTEM's texts), retry (a
// turn's attempt loop and its backoff) and claims (the store leases this
// daemon holds, with their watches and the grace a lapsed one gets).
//
// # State and the projection
//
// Every durable fact about an agent is an entry in its event log. The
// in-memory state that matters after a crash (name, parent, metadata, gates,
// subscriptions, reminders, pending messages, the latest run and its wait) is
// a projection of that log: package projection's State.Apply folds entries
// into it (no locks, no I/O there; the agent's record, agent*.go,
// guards its State under its lock). The live path applies each entry
// right after its append is durable; recovery applies the same entries
// read back from disk. The two paths therefore cannot disagree, which is
// what the crash-recovery fuzzer checks.
//
// An entry whose append failed is not applied, so the state in memory never
// runs ahead of the log. (On a cluster store an append whose answer was
// lost may have been stored: the log hands such entries over when it
// heals, late, and they are applied then; store.ErrUnknownOutcome, owed.go.) A log that refuses appends after a failure
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
// A checkpoint that passes its own checks is still checked against the
// log before it is used (ckptcheck.go, projection/verify.go): its shape,
// the lines its facts name (agent.created, the line that set the
// provider, the latest session event and gate, the latest run's start and
// end), and the open run's lines folded again; a mismatch folds the whole
// log, with a warning. The scrub then folds the skipped lines again and
// compares fingerprints; a mismatch there refolds the agent (at its next
// rest) and makes the engine's indexes agree.
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
// ckptWriter.Soon): by any entry while the agent is at rest (a message to a
// gated agent included), by CoreOptions.CheckpointEvery entries (the
// daemon's config.DefaultCheckpointEvery, 256) while it runs a turn, and
// once more when a turn ends, since its
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
// Code of this package runs on five kinds of goroutine:
//
//   - RPC goroutines (package server, one per request, in package
//     daemon): the Core's exported methods. Send and Resume start a turn
//     and wait for its result; tool.call with an agent credential
//     (agentauth.go) runs its tool here, joined to the running turn's
//     toolAttempt through the attempt's door (calldoor.go).
//   - Turn goroutines, started by a wake, Send and Resume through the
//     Core's scheduler (package schedule): runTurn's steps (turn.go), the
//     provider's Send and the tool calls it makes, then the aftermath
//     (deferred spawns, notices, the next wake).
//   - Timer callbacks of the scheduler (wait deadlines, reminders, the
//     periodic sweep, checkpoints, the takeover scan): on the real clock a
//     fresh goroutine per firing, on a schedule.Fake the goroutine that
//     advances it.
//   - Log commits: the log's OnAppend runs on the goroutine that commits
//     a group of appends, after the entries are durable: the record folds
//     them into its projection (ApplyCommitted, under stateMu), then the
//     bus publishes them.
//   - Helpers the Core owns: the session.json writers (snapshots.go), the
//     recovery loaders (load.go) and the scrub, the lease watches
//     (package claims), the tool.call writers of sends (tools_calllog.go).
//
// The locks, outermost first (on each line a lock is taken only while
// holding those to its left; "|" separates locks taken one after the
// other, never together). roster.mu is the roster's lock (the agents, the
// tree's changes that go with them, the subscription index, the gone
// registry, quarantine, closed and recovering); a.stateMu is a record's.
//
//	toolAttempt.serial -> a.remMu -> roster.mu | a.stateMu | a log append
//	a's owed flush lock -> roster.mu | a.stateMu | a log append
//	a.Ckpt.Mu -> a.stateMu
//	c.resv's lock (reservations) -> roster.mu | a.stateMu | the USER inbox's lock
//	token entry lock (the commit of token.Service's Consume, Revoke, Expire) -> roster.mu | a.stateMu | a log append | a's resumes lock
//	log commit (eventlog) -> a.stateMu, then bus.mu -> roster.mu, then a's resumes lock (the resume secret)
//	roster.mu -> the scheduler's mutex        a.stateMu -> the scheduler's mutex
//	a.stateMu -> a.Snap's lock, a's resumes lock (leaves)
//	a.Snap's write lock -> a.Snap's lock
//
// roster.mu and a.stateMu are never held together: code takes one, copies
// what it needs, releases it, then takes the other. Only the record's
// methods (agent*.go) take stateMu, each alone, returning with it
// released (TestOnlyTheRecordTakesItsLock holds every other file to
// that). Neither is held across a log append (the commit takes stateMu to
// fold the entry and the bus takes roster.mu, then the resumes lock, to
// find a secret), a provider call, a wake or a call that may come back
// into the record; the methods that take a callback (Room, WithReminder)
// call it under stateMu and say so, and their callers only read or arm a
// timer in it.
//
// Per agent there are seven mutexes, stateMu and six more: remMu
// serialises firing and cancelling one agent's reminders and is held
// across the append that records it; the owed end's flush lock is held
// across writing an owed run end and its aftermath (the owed end itself
// is an atomic); Ckpt.Mu serialises the checkpoint writes of one agent,
// taking stateMu briefly (CheckpointState); Snap serialises the
// session.json writes of one agent with its write lock and guards the
// snapshot with a leaf lock of its own, which status reads under
// stateMu; the resumes guard the secrets minted in the agent's runs and
// the results a repeated resume shares with a leaf lock, taken under
// stateMu when a turn's result hands the secret out (Suspended) and under
// the bus's lock when the live run.waiting event shows it. The agent.log
// cursors live under stateMu. c.resv holds its lock across a send's
// check, which reads the recipient's inbox (Room). The leaves: the
// claims' mutex (held across a claim request to the store), the USER
// inbox's mutex, an attempt's door and call log, and the mutexes inside
// tree, inbox, token, multiplexer, bus, launch, registry and stderrlog,
// none of which calls back into the engine while holding its own. The
// gone registry and the subscription index have no lock: roster.mu
// guards them. The config in force is an atomic pointer.
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
// toolAttempt, so it is logged, routed and replayed like the
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
