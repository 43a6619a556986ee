// Package store is the seam between the daemon and where its durable state
// lives: the per-agent event logs, the USER inbox log, the session
// snapshots (session.json) and the ownership of each agent.
//
// Two implementations exist:
//
//   - store/local, the default: today's files in the home directory,
//     written by eventlog and atomicfile, byte for byte, with the home's
//     daemon.lock flock owning every agent at once;
//   - store/jetstream: a NATS JetStream stream (one subject per log, each
//     message exactly one SPEC 3 line), key-value buckets for snapshots and
//     leases, and fencing of every append on the previous entry.
//
// The interfaces are what the daemon uses of eventlog today, so moving the
// daemon onto them is mechanical: Log has the methods the daemon calls on
// *eventlog.Log, LogOptions the per-log eventlog.Options it sets, and the
// reads the daemon does by path (eventlog.NewReader, ReadSeq on
// c.logPath(id)) become Store.Read and Store.ReadSeq by agent id.
//
// # Entries and position hints
//
// Entries are eventlog.Entry values whatever the store: Seq, TS, Event and
// Data mean the same thing everywhere, and every store checks the line's
// CRC and the seq order on every read. Entry.Off is a position hint whose
// unit is the store's: a byte offset in store/local, a stream sequence in
// store/jetstream. A hint is only ever passed back to the store that gave
// it (Read, ReadSeq, Resume); a wrong hint costs a scan, never a wrong
// entry.
//
// # Ownership
//
// Own claims an agent (or UserID) for this daemon and returns a Lease
// whose Epoch names the claim. A log opened with LogOptions.Lease writes
// under that claim; once another daemon claims the agent, the old
// handle's appends fail with an error wrapping ErrFenced (and
// eventlog.ErrPoisoned) and keep failing: the handle is poisoned for good
// and the agent must be released. A lease closes Lost when another claim
// took its id: the holder stops the agent's turns. A lease whose servers
// do not answer is kept and renewed when they do; past Expires the holder
// pauses the agent's side effects (the fence keeps appends safe). The local store's lease is
// the home flock: one daemon owns every agent, its epoch is constant and
// Lost never closes.
package store
