// Package jetstream is a store.Store on NATS JetStream: warren's logs,
// snapshots and agent ownership on a replicated engine, so that several
// warren daemons can share agents and take over those of a daemon that
// died (docs/DECISIONS.md, "Past one machine").
//
// # Requirements
//
// New refuses servers that do not fsync every JetStream write
// (`jetstream { sync_interval: always }`; server.Options.SyncAlways when
// embedded): with the default two-minute flush an acknowledged append can
// be lost in a power cut (Jepsen, NATS 2.12.1). For servers running in this
// process (Options.Embedded, Embed) the setting is read from their
// configuration. For an external cluster it is read with the system
// account's `$SYS.REQ.SERVER.PING.JSZ` request, which only a user of the
// system account may send; a connection that cannot is refused with
// ErrSyncUnknown. Options.UnsafeLazyFsync (`--unsafe-lazy-fsync`) accepts
// both cases with a warning. Use R3 (Options.Replicas = 3) in a cluster.
// The module pins nats-server v2.14.5, the newest release whose go.mod
// stays within this module's go directive; it has atomic batch publish.
//
// # Stream
//
// One stream, WARREN_LOG: file storage, Replicas, subjects warren.log.>,
// a 2-minute duplicate window, AllowAtomicPublish, DenyDelete, DenyPurge,
// AllowDirect (for batch reads; see Reads for what is asked of the
// leader).
//
//	warren.log.<agent-id>   an agent's log
//	warren.log.USER         the USER inbox log (store.UserID)
//
// Each message body is exactly one SPEC 3 line, newline included, byte for
// byte as eventlog writes it to events.jsonl (eventlog/record.EncodeLine): the
// concatenated bodies of a subject are the agent's events.jsonl. Every
// read checks each line's CRC and content (eventlog/record.DecodeLine) and the
// seq order (1, 2, 3, ... with no gap or repeat), so an entry damaged
// inside the servers is an error wrapping eventlog.ErrCorrupt, never a
// silent fold. Entry.Off is the message's stream sequence.
//
// # Reads
//
// No read makes a consumer. Every message a fence or a check rests on is
// asked of the stream leader with $JS.API.STREAM.MSG.GET.WARREN_LOG,
// which only the leader answers in a cluster (nats.go's Stream.GetMsg is
// not used: with AllowDirect it would go to any replica): a log's last
// message (last_by_subj; the end of every read and the fence of OpenLog),
// a Resume's entry, the stored lines a duplicate acknowledgement is
// checked against, ReadSeq's hint. (A log's end read ahead by a replica
// is a hint that a fenced claim checks: "Ends read ahead".)
//
// A read then fetches the entries up to that end in batches of 512 by
// direct get ($JS.API.DIRECT.GET.WARREN_LOG, next_by_subj, batch), which
// any replica that is the leader or about current answers. Replicas store
// only committed entries, but one may lag or be catching up, so a
// replica's batch is only taken message by message as far as each one
// checks: on the subject, within the end, CRC and content, seq = the
// previous entry's + 1 (and, for a read from a hint, the first message at
// the hint itself). A batch that is short or empty, or a message that
// does not check, sends the reader to the leader (next_by_subj, one
// message a request) for the rest of that read; what the leader holds is
// the authority, so only a seq break or a damaged line the leader returns
// is eventlog.ErrCorrupt, and an end the leader no longer reaches is too.
// A read thus sees every entry acknowledged before it started (its end
// comes from the leader, and it reads up to it), never depends on the
// JetStream meta leader, and never waits on a dead server: a consumer
// (R1, ephemeral) is placed by the meta leader on a random peer it
// believes online, which a server killed with kill -9 stays for minutes,
// and its create is then never answered. Leader requests that go
// unanswered are retried with a backoff (unavailable.go) and end as
// store.ErrUnavailable.
//
// # Ends read ahead
//
// A recovery or a takeover opens many logs at once (the engine calls
// HintEnds before it opens them). HintEnds asks for the last message of
// up to 1,024 logs in one direct get (multi_last, batch: the server's
// limit of one answer), which any replica answers, and keeps each as a
// hint that the next OpenLog of that log takes instead of asking the
// leader (last_by_subj). A hint is never the fence:
//
//   - OpenLog replays up to the hinted end and appends its agent.claimed
//     fenced on it. The leader refuses the claim if the log goes on past
//     the hint (a replica that lagged, or an entry appended since); then
//     nothing was stored, and OpenLog reads the leader's end, replays the
//     entries after the last one it replayed, checks the epochs again,
//     and claims on that end.
//   - A hinted last message that is this lease's own agent.claimed would
//     spare the claim; only the leader's end may, so OpenLog then asks it.
//     So does an open whose Resume lies past the hinted end.
//   - A Resume at the hinted end itself is checked against the hint's
//     line (the message a replica stores at that stream seq is the
//     committed one), with no read.
//
// A log opened from a hint thus sees every entry acknowledged before its
// claim, as one opened from the leader's end does. A log absent from the
// answer costs only the leader's read that its open would have made
// anyway; a request refused or not answered in time (2 s) ends the
// reading ahead, and the logs it did not reach are opened that way too.
//
// # Headers of an append
//
//	Nats-Msg-Id                          <agent-id>.<epoch>.<seq>
//	Nats-Expected-Last-Subject-Sequence  stream seq of the log's last entry (0: empty log); first message only
//	Nats-Batch-Id                        a NUID, when the append has several entries
//	Nats-Batch-Sequence                  1..n within the batch
//	Nats-Batch-Commit                    "1" on the last message of the batch
//
// An AppendBatch (up to 1,000 records) is one atomic batch: all stored or
// none. Appends to one log are serialised: one fenced publish in flight.
//
// The dedup id carries the epoch because JetStream's clustered path
// checks the dedup id before the fence: with ids of the form <agent>.<seq>
// an old owner's append colliding with the new owner's entry would be
// acknowledged as a "duplicate" of an entry it did not write. Even so, a
// duplicate acknowledgement is accepted only after reading the stored
// messages back and finding this append's very lines; otherwise it is
// ErrFenced. A standalone server checks the fence first; a refusal whose
// subject already ends with this append's messages (ids and bytes) is
// the same idempotent case. Correctness never rests on the 2-minute window.
//
// # Failures
//
// A refusal by the fence (JetStream error 10071, "wrong last sequence")
// means another claim wrote since this handle's last entry: the append
// fails with an error wrapping store.ErrFenced and eventlog.ErrPoisoned,
// and so does every later append on the handle. Any other failure
// (timeout, lost connection, leader change, an API error) leaves the
// outcome unknown: the entries may be stored. An append the servers did
// not answer (no responders while the stream elects a leader, a timeout,
// the connection moving) is sent again as it is, same ids and fence, with
// the backoff of unavailable.go (about 17 s, an election's length): what
// a lost attempt stored is then found by the duplicate check or by the
// fence's refusal, so nothing is written twice. When the retries run out,
// or the answer cannot be read, the handle is poisoned (eventlog.ErrPoisoned,
// not ErrFenced; Degraded reports it) and heals in the background
// (heal.go): once the leader answers, a log still ending with the
// handle's last entry heals as it is; one ending with the lost append's
// very messages has them handed to OnAppend, late, and heals past them;
// anything else fences the handle for good. OnHeal is called when it
// heals.
//
// # Ownership (bucket warren-owners)
//
// A KV bucket with TTL Options.OwnerTTL (10 s by default), history 1. Key:
// the agent id (or USER); value: {"node":"...","boot_id":"..."}. Own is a
// kv.Create, which succeeds only on an absent, deleted or expired key, or,
// when the key's last write (the server's timestamp; read from the
// bucket's stream leader, not by a KV Get a lagging replica may answer) is
// older than OwnerTTL by this daemon's clock, a kv.Update on that write's
// revision: a lapsed lease the server's MaxAge sweep has not removed yet
// (it runs up to about a second late; a renewal racing with the update
// fails on the same revision). The same update takes over a last write
// holding this boot's own value (node and boot id): a claim of this Store
// whose answer was lost, which would otherwise block the id for a TTL. Daemon clocks are assumed to agree with the servers'
// within a fraction of the TTL; a skew only moves a takeover earlier or
// later, the fence keeps it safe. The revision a claim returns is its
// epoch (revisions grow across the bucket, so a later claim has a greater
// epoch). The lease renews with kv.Update(key, value, last revision) every
// TTL/3 (lease.go). A renewal the bucket does not answer is tried again
// (every 400 ms at most) for as long as it takes, past the expiry if need
// be; the lease closes Lost only when a read shows another claim (or the
// connection is closed for good). A refusal after an attempt whose answer
// was lost is checked: if the key holds this lease's value at a later
// revision, that attempt was stored and the lease goes on; a key gone
// (lapsed during the outage, nobody claiming it) is created again. Release
// deletes the key on its last revision; the USER key's delete marker names
// the clean epochs ("Claims after a release"), and is written only when
// the Store can write no log more. Holder reads who holds a key;
// Peers lists the log stream's servers (cluster.go, for daemon.status).
//
// A daemon has one key: USER. Once a Store holds the USER inbox's lease,
// Own of an agent writes nothing: the agent's claim is that lease (its
// epoch, its expiry, its loss; Release gives up nothing). A daemon runs
// the cluster's agents only while it holds the USER inbox, and another
// daemon claims them only after claiming the USER inbox, which needs this
// lease lapsed (the TTL since its last renewal, and the claims package's
// grace), so a key per agent adds no exclusion the USER key does not give,
// while costing one replicated write per agent per TTL/3 at rest. The new
// owner's epoch (its USER claim's revision) is greater than every epoch in
// the logs, and its first open of each log appends its agent.claimed,
// which fences the old owner's appends (below; after a clean release, the
// log's first append carries it: "Claims after a release"). A Store whose USER lease
// is past its expiry unrenewed claims no agent: the claim waits for the
// renewal (20 s at most, then store.ErrUnavailable), and OpenLog refuses a log whose last message was written under a
// greater epoch than its lease's (each message id names its epoch), so
// an old owner resuming before it learns the inbox was taken cannot take
// back an agent the new owner created. A Store that has not claimed USER
// (tests, tools) claims an agent with a key of its own, as above.
//
// OpenLog needs the lease (LogOptions.Lease). After replaying, if the
// log is not empty and its last entry is not this epoch's claim, it
// appends, fenced on the last entry,
//
//	{"seq":N,"ts":"...","event":"agent.claimed","data":{"node":"...","epoch":E,"boot_id":"..."},"crc":"..."}
//
// from which on every append of an earlier owner fails with ErrFenced.
// The claim is handed to LogOptions.Replay after the entries before it
// (OnAppend sees only later appends), so the caller's fold ends with it.
// An empty agent log gets no claim (its first entry must be agent.created;
// its first append is fenced on "no entry yet", as is any rival's). The
// USER log is claimed even when empty: it has no required first entry,
// and an earlier owner's first append would otherwise pass the fence. A
// log holding a claim with a greater epoch than the lease's refuses to
// open (ErrFenced).
//
// # Claims after a release
//
// A log whose last entry was written under a clean epoch is opened
// without its claim, which its first append carries instead (lazy.go).
// The USER key's release marker is a KV delete (KV-Operation: DEL) fenced
// on the lease's last revision, with the header
//
//	Warren-Clean-Epochs: E,E1,E2,...
//
// naming the releasing holder's epoch, then the clean epochs its own claim
// inherited, 16 at most. A Store writes it only when it can write no log
// more under that epoch: every log it opened under it is closed (an open
// is counted from its start, before it reads anything), no append is in
// flight (counted before the handle is checked, so none can start on a
// handle closed before the release looked), and none had an append of
// unknown outcome (closed poisoned, or healed as not stored: a leader
// elected meanwhile may still apply it). The check and a seal of the
// epoch are one step: from then on the Store opens no log under it.
// Otherwise Release stops renewing and leaves the key to lapse. A USER claim that replaced such a
// marker (an Update on its revision: no claim came in between) takes its
// epochs as clean; one that found the key absent, lapsed or purged takes
// none. The holders of clean epochs write no more, and every other
// holder's append to a log one of them wrote last is refused by the fence
// (its handle knows an earlier end). So OpenLog, reading the end from the
// leader (HintEnds reads nothing ahead then: a replica's end could be
// short of it), defers the claim of a log last written under a clean
// epoch: the log's first append is the batch [agent.claimed, entries...],
// fenced on that end, and the caller's fold gets the claim with them. A
// batch of 1,000 records sends the claim alone first. A log last written
// under any other epoch, or more than 16 clean handovers ago, is claimed
// at its open as above. A marker without the header (an earlier version's
// release) names no epoch. Were a deferred claim's batch ever refused by
// the fence (nothing above lets another writer reach such a log), the
// agent would be released, as on any fenced append, until a restart.
//
// # Snapshots (bucket warren-sessions, object store warren-session-blobs)
//
// KV key: the agent id; value: one tag byte, then
//
//	'I' + the session.json line (json.Marshal of session.Session, "\n")
//	'O' + {"size":N,"sha256":"<hex>"}: the line is the object named by the
//	      agent id in warren-session-blobs (snapshots larger than one NATS
//	      message, i.e. max_payload minus 64 KiB; provider blobs run to
//	      several MiB)
//
// Load checks the object's size and SHA-256 against the reference. KV
// reads may be served by a lagging replica (nats.go reads KV directly): a
// snapshot is a cache of the log, which stays the authority.
//
// # Checkpoints (bucket warren-checkpoints)
//
// KV key: the agent id; value: package checkpoint's bytes (a header line,
// then the projection), as store/local's checkpoint.json holds them, with
// the resume point's Off a stream seq. A checkpoint is a cache: the daemon
// checks it against the log's lines (witnesses read from the leader, the
// resume entry's CRC at OpenLog) before use, and folds the whole log on
// any doubt. One larger than a message is not kept (checkpoints.go).
//
// # Nodes (bucket warren-nodes)
//
// KV key: the node name, base64url; value: what that daemon tells the
// others, {"config_hash":"...","updated":"..."} (daemon.status shows
// which nodes run other provider entries).
//
// # What is not proven here
//
// faultfs cannot reach inside nats-server, which writes through os: the
// power-loss proof of store/local (a simulated power cut at every file
// operation) does not carry over. Durability here rests on sync_interval
// always, R3 replication and the reader's CRC and seq checks; the tests
// kill servers (the stream leader mid-appends) but do not cut power.
package jetstream
