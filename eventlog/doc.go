// Package eventlog is warren's per-agent append-only event log: one JSON
// object per line, each line protected by a CRC, made durable through a
// pending-file write-ahead log with group commit, and repaired on open
// after a crash.
//
// # On-disk format
//
// A log is a file named *.jsonl (agents/<id>/events.jsonl, user.jsonl)
// holding one entry per line, each with its CRC:
//
//	{"seq":12,"ts":"2026-11-22T10:01:10.123Z","event":"turn.start","data":{...},"crc":"1a2b3c4d"}\n
//
// The line format (fields, order, CRC, limits, what counts as a line and
// what is corruption) and the group framing of the pending file are
// documented in, and owned by, the package eventlog/record; this package
// handles the files.
//
// The pending file (events.pending next to events.jsonl) holds the group
// being committed, framed as record documents ("Groups"): its lines byte
// for byte as they will appear in the log, then a commit trailer
// {"group":N,"crc":"..."}. A pending file without a valid trailer is
// incomplete and discarded whole. The file exists while its log is busy
// and is absent once the log has been idle for Options.PendingIdle (1 s by
// default) or closed.
//
// Copies kept aside sit next to the log: <log>.torn-<UTC timestamp> holds
// the bytes recovery cut from the end of the log (see Open and recovery),
// <log>.corrupt-<UTC timestamp> the whole log as Repair found it, and
// <pending>.corrupt-<UTC timestamp> a pending file Repair moved aside. The
// timestamp is 20060102T150405.000Z; a -N suffix keeps names unique.
// Nothing reads them; they are for the operator.
//
// # Write protocol (Append, AppendBatch)
//
// Appenders queue; the first one finding no commit in progress becomes the
// leader and commits the whole queue as one group (group commit); on
// completion it hands leadership to the first caller that queued meanwhile.
// For each group the leader:
//
//  1. assigns consecutive seqs and formats the lines and the trailer;
//  2. writes lines and trailer in one write at offset 0 of the pending
//     file, creating it first if it is absent, and fsyncs it; once per
//     creation it also fsyncs the directory, so the file's entry is
//     durable before the log is touched (see below);
//  3. appends the lines to the log in one write and fsyncs the log;
//  4. keeps the pending file open for the next group. When no group has
//     committed for Options.PendingIdle, a timer takes the leader's role,
//     closes the pending file and removes it (no directory fsync); Close
//     removes it too.
//
// Only after step 3's fsync returns are the group's entries acknowledged
// (OnAppend is called, then the callers return). Any write or fsync error,
// or a short write, poisons the handle: every caller of the group gets the
// error (and ErrPoisoned), and later appends get ErrPoisoned until the
// handle is reopened (below, "Faults and healing"). A failed fsync is
// never retried on the same file handle (fsyncgate: the kernel may have
// dropped the dirty data), and no append ever follows a possibly partial
// line. A failed removal in step 4 is logged (idle) or returned
// (Close) and changes nothing else: the file holds only durable groups, and
// the next group truncates it on creation.
//
// Why step 4 departs from the specification's "then events.pending is
// removed" after every group: creating a file and fsyncing it commits its
// inode and directory entry to the filesystem journal, while rewriting
// blocks a file already has and fsyncing it is one device flush. On this
// project's ext4 disk, create+write+fsync+remove costs about 2.5 flushes
// and an in-place write+fsync about 0.7, so a single writer reaches
// 0.54-0.63x the raw append+fsync rate instead of 0.30-0.36x. What a crash
// can leave is no different in kind: a complete group already in the log
// (replay skips it; the specification's own crash-after-append case), or a
// group torn by its own write (no valid trailer, discarded). An in-place
// rewrite torn by a power loss can mix the new group's bytes with the
// previous group's, but the previous group is durable in the log by then,
// and the trailer's CRC over every byte before it rejects any mix. Removing
// the file when the log goes
// idle keeps the specification's on-disk promise that it is normally absent.
//
// Why the pending file's directory entry is made durable before the first
// log write after its creation: recovery cuts damage at the end of a log
// only where the pending file covers it (below), so a power loss that tears
// the log write must find the file. The cost is one directory fsync per
// creation, that is once per burst of appends after the log was idle, not
// per group (the file is then rewritten in place); a multi-record
// AppendBatch needed it anyway to stay all or none.
//
// Why removal is not made durable: a removed pending file that comes back
// after a crash only holds lines already in the log (the log was fsynced
// before the removal), and replay skips seqs the log already has. A
// pending group never leaves a gap: the previous group's log fsync
// returned before the next group was written to the pending file.
//
// # Open and recovery
//
// A torn write is only ever the last write: a group's log write starts
// after the previous group's fsync returned, and after its own pending
// file, with the directory entry, is durable (step 2). So the region a
// crash can damage is the end of the log from the last good line, at most
// as long as the pending lines the log lacks; or, for a log written
// without a pending file (by an older version, or copied while busy), a
// fragment after the last newline. Recovery cuts nothing else.
//
//  1. MkdirAll the log's directory. Open the log (O_CREATE, O_NOFOLLOW: a
//     symbolic link at the path is an error wrapping faultfs.ErrSymlink
//     that names it; the link's target is never opened). With
//     Options.MustExist a missing log is an error wrapping fs.ErrNotExist
//     and nothing is created.
//  2. Scan every line. The good prefix ends at the first damaged line (bad
//     CRC or framing, no newline, over-long). Then:
//     a. A CRC-valid line with wrong content or seq, at any place, is a
//     *CorruptError (errors.Is ErrCorrupt) naming the file, line, expected
//     seq and offset; nothing is changed.
//     b. A trailing fragment (no newline) that is a whole CRC-valid entry
//     with the next seq, without its newline or with one other byte in
//     its place (a lost or flipped '\n'), is kept: the odd byte is cut and
//     the cut fsynced, then the newline is appended.
//     c. If the pending file is a complete group continuing the log and
//     the damaged region (from the end of the good prefix to the end of
//     the file, whatever it holds) is no longer than the group's lines the
//     log lacks, the region is the torn last write: it is cut, and step 5
//     appends the group.
//     d. A fragment with no newline that no pending file covers is cut.
//     e. Anything else, in particular complete lines failing their CRC at
//     the end of the log, is a *CorruptError; nothing is changed.
//     Before cutting (c, d), the cut bytes are copied to a new file
//     <log>.torn-<UTC timestamp> beside the log, fsynced, and the
//     directory fsynced; a warning names the copy. Recovery never deletes a
//     byte it did not prove unacknowledged.
//  3. Fsync the log when it may hold complete lines that were written but
//     not yet fsynced (recovery reports them, so they must not vanish in a
//     later power loss): when it is new or empty, when step 2 cut
//     anything, or when a pending file exists. Without a pending file
//     every line was made durable by some fsync: a group's pending file is
//     durable before its log write and is removed only after its log
//     fsync returned (a failed removal leaves it, and then the log is
//     fsynced). So recovering ten thousand logs at rest costs no device
//     flush each.
//  4. If the log is new or empty, fsync its directory and that
//     directory's parent, and every directory this Open created and its
//     parent, so the file and the directories made for it (by this Open or
//     by one that crashed) are durable before anything is acknowledged; a
//     failure is fatal. The directories above are the caller's to make
//     durable: the daemon fsyncs its home and the home's ancestors once per
//     start (not on every new log, which cost each create four or more
//     fsyncs). With a Syncer (below) that flushes whole filesystems, a new
//     or empty log with nothing to cut and no pending file skips steps 3
//     and 4 and lists those directories instead: its first group's
//     pending-file flush is then a syncfs, which makes the log file, those
//     directories and the pending file durable at once, before the log is
//     written and before anything is acknowledged. A crash before that
//     flush leaves an empty log or none, which nothing acknowledged
//     depends on. A create is so two flushes: that syncfs and the log's
//     fsync (engine TestFsyncsPerOperation).
//  5. If the pending file exists and is a complete group, skip the seqs the
//     log already holds; if some continue the log, first fsync the pending
//     file and its directory (the crash may have come before either was
//     durable, and a crash during the replay must find the group again),
//     then append them in one write and fsync the log. A seq that would
//     leave a gap is a *CorruptError for the pending file (Repair moves
//     such a file aside). An incomplete pending file is discarded: its
//     fsync never returned, so nothing of it was acknowledged. Then
//     remove the pending file and fsync the directory. The pending file is
//     opened without following links too.
//
// Every step is idempotent, so a crash at any point of Open is recovered by
// the next Open, and opening twice gives the same bytes as opening once.
//
// Resuming (Options.Resume): a caller that has folded a log up to line N
// (a checkpoint) passes N's seq, byte offset, crc and length. Open first
// checks, read-only, that a complete line with a valid crc, that seq and
// that crc starts at that offset (else ErrResumeMismatch, nothing
// changed); a line of 64 KiB or more whose length is given is checked by
// its ends only (its seq, crc field and newline where the length says),
// and whole by Verify. Then Open runs steps 2-5 from the end of that line:
// the torn-tail, corruption and pending-file rules apply to the lines after
// it exactly as to a whole log (the pending file can only hold the last
// group, which is after any line a caller folded). The lines before N are
// not read; Verify checks them and line N (every line complete, crc-valid,
// seqs 1..N in order), and the Log runs it once before its first append
// (VerifyPrefix), refusing appends with the *CorruptError if they fail.
//
// A Log is safe for concurrent use. One process must hold at most one open
// Log per file (the daemon's lock file ensures one process).
//
// # Faults and healing
//
// A poisoned handle closes its files at once and reopens the log when the
// cause may be gone: on the first append after Options.HealBackoff (100 ms
// by default, doubling after each failed attempt up to 5 s), from a timer
// if no append comes (so that Degraded clears by itself), or when Heal is
// called. Until then appends fail fast with ErrPoisoned and the cause, and
// Degraded returns it. Reopening (the heal) does not re-read the log; the
// handle knows what Open would find:
//
//  1. Open the log file again (a new handle: the failed one is never used
//     again).
//  2. Its size must be at least the end of the last acknowledged entry.
//     Bytes past it can only be the remains of the failed group's write
//     (a torn tail in the exact sense of Open: the region of the last
//     write, never acknowledged); they are cut. A file shorter than that,
//     or longer when no log write failed, was changed by something else.
//  3. The last line before that size must be the last acknowledged entry
//     (CRC and seq). A change is ErrChanged: the handle stays refused, and
//     only Open (a restart) decides what the file holds.
//  4. Fsync the log, so the cut is durable before anything depends on it,
//     then remove the pending file and fsync the directory. The pending
//     file holds either the failed group (never acknowledged: the
//     acknowledgement follows the log's fsync) or a group already in the
//     log, so nothing acknowledged is lost; removing it means a later crash
//     cannot replay the failed group behind the back of callers that were
//     told it failed. The order matters: with the log cut first, a crash
//     in between finds any resurrected tail still covered by the pending
//     file.
//
// After a heal the file holds exactly the acknowledged entries, as memory
// does, and a crash at any point of the heal leaves what a crash during
// the failed append would have left. Options.OnHeal then runs. Open itself
// is not retried in place: a failure during Open is returned to its caller.
//
// # Open handles (Files)
//
// Options.Files caps how many logs hold open file handles at once. When a
// log needs its handles and the cap is reached, the least recently used
// idle log closes its own (removing its pending file as on idle
// retirement: every group in it is in the log). It keeps its last seq and
// the size of its acknowledged entries, and its next append reopens the
// file with steps 1-3 above (no cut: any size change is ErrChanged),
// reading only the last line. A log in the middle of a commit is never
// closed, and a commit never waits for another log, so the cap can be
// exceeded by the number of logs committing at the same moment; the next
// reopen brings the count back under it.
//
// # Shared flushes (Syncer)
//
// Options.Syncer routes the write protocol's two fsyncs (step 2's pending
// file, step 3's log) through a Syncer shared by every log of a home (the
// daemon's store always uses one). The fsyncs asked for while a flush
// runs are done together by the next flush: one syncfs(2) of the
// filesystem when there are several, a plain fsync when there is one (a
// syncfs even then for the first group after the pending file's creation:
// it stands for the file's fsync and its directory's, and for a new log's
// deferred syncs, in one flush). The
// protocol is unchanged, step for step: syncfs makes every file and
// directory of the filesystem durable, a superset of each fsync it stands
// for, and it starts after each caller's write returned. A failed syncfs
// fails, and poisons, every log it stood for, and also every log that
// wrote before it and syncs after it (the Syncer counts a filesystem's
// failed flushes, and a log notes the count before each write): a syncfs
// writes back, and so may drop, every log's unsynced data, and the kernel
// reports its failure once. Each filesystem keeps one handle open for its
// flushes, so that a writeback failure between two flushes is reported to
// the next. Where syncfs cannot be trusted to flush everything and report
// a failure (not Linux, Linux before 5.8, a filesystem other than ext4,
// xfs, btrfs or tmpfs: FUSE never flushes on syncfs), the Syncer fsyncs
// file by file.
//
// Why: each log is its own group, so 64 agents writing to 64 logs got
// about 2x the raw fsync rate, against about 20x for 64 writers on one
// log; through a Syncer they get 5.3-5.5x (BenchmarkAppend64WritersOn64Logs
// against ...Syncer). That is the ceiling of this protocol on this disk:
// BenchmarkCeiling64On64 runs the same two ordered flushes per append on
// bare files with a flusher that has no bookkeeping, and reaches 4.5-5.3x
// in the same run. With the log's flush alone (any design that makes an
// entry durable in its own log before acknowledging it, a write-ahead file
// shared by all logs included) it reaches 8-10x (docs/DECISIONS.md).
//
// The daemon's store uses a Syncer; the engine's tests open logs without
// one, so that a fault injected into one file's fsync hits that fsync (a
// shared flush would stand in for it). The eventlog's own crash tests and
// the crash fuzzers (tests/) run with a Syncer.
//
// # Reading
//
// ReadAll and Reader read a log without changing it (and without
// following a link at its path): damage after which no valid line follows
// ends the entries (it may be a torn tail Open has not yet seen), damage
// followed by a valid line is a *CorruptError. Every entry read or
// appended carries the byte offset of its line (Entry.Off; 0 for entries
// replayed from the pending file): ReadSeq reads one entry back by seq,
// reading just that line when the offset hint is right and scanning
// otherwise, and NewReaderAt starts a Reader at a remembered offset, so a
// caller can keep a reference instead of an entry in memory. Follow yields entries
// as complete CRC-valid lines appear, driven by a caller-supplied wait
// function (fsnotify in the CLI). Repair copies a damaged log durably to
// <path>.corrupt-<UTC timestamp>, cuts it back to its last good entry and
// fsyncs it, reporting what it cut.
package eventlog
