// Package agentrec is the engine's record of one live agent: its log, the
// projection folded from it, the state of this process only (the running
// turn, the flags that decide whether it may run one, what its turn
// deferred) and the bookkeeping that has locks of its own (checkpoints,
// the session.json snapshot, an owed run end, resume secrets, log page
// cursors, reminder firing). Every read and write of the state under the
// record's lock is a method here, so the engine and the packages it runs
// (turnrun, waits, lifecycle, mail, views, recoverrun ...) never take the
// lock themselves: each of those packages says what it needs of an agent
// in an interface of its own, and the record satisfies it (the engine's
// adapters embed *agent and add what needs the engine).
//
// # What the lock guards
//
// agent.mu guards the projection (package projection's State, folded by
// ApplyCommitted as the log commits entries) and the live flags: busy
// (and claims, how many times it was set, which quiet compares), the
// running turn (cur, and the attempt's tools in it), permit,
// deferred, spawns, completing, held, settling, corrupt and released.
// The record's id and Log are set by newAgent and never change. terminating
// is the exception: it is written and read under the engine's table's
// lock (roster.mu, package roster) and never under mu, since termination and
// subscribing decide on it there (SetTerminating, Terminating).
//
// The fields with locks of their own are exported or have methods that
// take no lock of the record's: Ckpt (Mu serialises one agent's
// checkpoint writes; Seq and Armed are atomics), Snap (package snapsave),
// Cursors (package logpage), the owed run end (package owed), the resume
// secrets (package waits' Resumes) and the reminder timers (package
// reminders' Timers).
//
// # Goroutines
//
// Code of the engine runs on five kinds of goroutine, and each reaches a
// record only through its methods:
//
//   - RPC goroutines (package server, one per request, in package
//     daemon): the Core's exported methods. Send and Resume start a turn
//     and wait for its result; tool.call with an agent credential
//     (engine/agentauth.go) runs its tool here, joined to the running
//     turn's toolexec.Attempt through the attempt's extcall.Door (the
//     record's TurnTools).
//   - runningTurn goroutines, started by a wake, Send and Resume through the
//     engine's scheduler (package schedule): package turnrun's steps
//     (through the engine's turnAgent, which embeds the record), the
//     provider's Run and the tool calls it makes, then the aftermath
//     (deferred spawns, notices, the next wake).
//   - Timer callbacks of the scheduler (wait deadlines, reminders, the
//     periodic sweep, checkpoints): on the real clock a fresh goroutine
//     per firing, on a schedule.Fake the goroutine that advances it.
//   - Log commits: the log's OnAppend runs on the goroutine that commits
//     a group of appends, after the entries are durable: ApplyCommitted
//     folds them into the projection (under mu), then the engine
//     publishes them on its bus.
//   - Helpers owned by the engine: the session.json writers (package
//     snapsave), the recovery loaders (package agentload) and the scrub,
//     the lease watches of a cluster store (package claims).
//
// # Lock order
//
// The engine's locks, outermost first (on each line a lock is taken only
// while holding those to its left; "|" separates locks taken one after
// the other, never together). roster.mu is the lock of the engine's
// table of agents (package roster: the agents, the tree's changes that go
// with them, the subscription index, the gone registry, quarantine,
// closed and recovering); a.mu is a record's lock.
//
//	toolexec Attempt.serial -> a's Timers -> roster.mu | a.mu | a log append
//	a's owed flush lock -> roster.mu | a.mu | a log append
//	a.Ckpt.Mu -> a.mu
//	c.resv's lock (reserve.Set) -> roster.mu | a.mu | the USER inbox's lock
//	token entry lock (the commit of token.Service's Consume, Revoke, Expire) -> roster.mu | a.mu | a log append | a's resumes lock
//	log commit (eventlog) -> a.mu, then bus.mu -> roster.mu, then a's resumes lock (the resume secret)
//	roster.mu -> the scheduler's mutex        a.mu -> the scheduler's mutex
//	a.mu -> a.Snap's lock, a's owed lock, a's resumes lock (leaves)
//	a.Snap's write lock -> a.Snap's lock
//
// roster.mu and a record's a.mu are never held together: code takes one,
// copies what it needs, releases it, then takes the other (every method
// here takes a.mu alone and returns with it released). Neither is held
// across a log append (the commit takes a.mu to fold the entry and the
// bus takes roster.mu, then the resumes lock, to find a secret), a provider
// call, a wake or a call into another package that may call back; the
// methods that take a callback (Room, WithReminder) call it under a.mu
// and say so, and their callers only read or arm a timer in it. The
// reminder Timers (package reminders) serialise firing and cancelling
// one agent's reminders and are held across the append that records
// it; the owed end's flush lock (package owed) is held across writing
// an owed run end and its aftermath; Ckpt.Mu serialises the checkpoint
// writes of one agent, taking a.mu briefly (CheckpointState) to copy
// the state; Snap (package snapsave) serialises the session.json writes
// of one agent with its write lock and guards the snapshot with a leaf
// lock of its own, which status reads under a.mu; the resumes (package
// waits) guard the secrets minted in the agent's runs and the results a
// repeated resume shares with a leaf lock, taken under a.mu when a
// turn's result hands the secret out (Suspended) and under the bus's
// lock when the live run.waiting event shows it; c.resv (package
// reserve) holds its lock across a send's check, which reads the
// recipient's inbox (Room). The leaves: the claims' mutex (package
// claims; held across a claim request to the store), Cursors' (package
// logpage), the USER inbox's mutex, an attempt's door for joined calls
// (package extcall), and the mutexes inside tree, inbox, token,
// multiplexer, bus, launch, registry and stderrlog, none of which calls
// back into the engine while holding its own. The gone registry
// and the subscription index have no lock: roster.mu guards them.
//
// Each package the engine's state was split into documents its own locks
// in its package doc (agentload, claims, extcall, gone, lifecycle,
// logpage, owed, recoverrun, reminders, reserve, snapsave, subs, waits;
// turnrun and views take none: the engine reads an agent's snapshot
// through the record and builds its views after; gate and mail take
// none: their steps call the engine, one lock at a time); this section
// is the one place their order is written.
package engine
