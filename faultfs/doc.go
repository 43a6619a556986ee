// Package faultfs is the filesystem interface every warren storage path uses,
// with two implementations: OS, the real filesystem with durable fsync and
// directory fsync, and Mem, a crashable in-memory filesystem with fault
// injection that the crash tests drive.
//
// # Durability model
//
// Mem follows pebble's crashable MemFS. Every file is an inode-like node with
// two byte slices: data (what reads see) and synced (what File.Sync last made
// durable). Every directory has two entry maps: children (visible) and
// syncedChildren (what SyncDir last made durable). Open Files point at nodes,
// so a File keeps writing to its file after a rename or remove.
//
//   - File.Sync copies data to synced. It does not make the file's directory
//     entry durable: a created file whose parent was never synced disappears
//     on power loss, even if its data was synced.
//   - SyncDir (or File.Sync on a File opened on a directory) copies children
//     to syncedChildren. Creates, renames, removes and mkdirs are durable only
//     after SyncDir on the parent (both parents for a rename).
//   - FileSystem.Sync (OpenFS; syncfs(2): the Mem is one filesystem) does
//     both for every file and directory in the Mem at once. It reports a
//     writeback failure since the handle was opened (a failed File.Sync,
//     another handle's failed Sync) once, as Linux's errseq does.
//   - Reboot(RebootOptions{Mode: PowerLoss}) rebuilds the tree from synced
//     entries and synced data. Tail decides what survives of data appended
//     past the synced length: nothing (TailNone), a random prefix
//     (TailPrefix), or a random prefix followed by zeros (TailZero) or random
//     bytes (TailGarbage); never more bytes than were appended unsynced.
//     Durable bytes overwritten in place and not synced again come back as
//     they were with TailNone; with another Tail mode the overwrite is torn
//     in units of TearUnit bytes, each keeping the old bytes or taking the
//     new (or, with TailZero and TailGarbage, becoming zeros or garbage).
//     UnsyncedEntries lets a chosen share of the unsynced creates, renames
//     and removes survive too, as real filesystems often persist metadata
//     before they are asked to.
//   - Reboot(RebootOptions{Mode: ProcessCrash}) keeps every completed
//     operation (the kernel page cache survives a kill -9) but keeps the
//     synced state apart, so a later power loss still loses unsynced data.
//
// # Crashes
//
// Mutating operations are counted: OpenFile with O_CREATE or O_TRUNC, Write,
// Sync, Truncate (File or FS), Rename, Remove, MkdirAll (one per call),
// SyncDir and FileSystem.Sync (kind OpSyncFS). Mem.Ops returns the trace, Mem.MutatingOps its length.
// Mem.CrashAt(k) crashes at the k-th mutating operation from now: that
// operation has no effect (except that a Write in flight may land in part,
// per the Tail mode at Reboot) and returns an error wrapping ErrCrashed, and
// so does every later operation on the FS or on any open File, reads
// included, until Reboot. Files opened before a Reboot stay dead.
//
// # Fault injection
//
// Mem.Inject(Rule) fails the Nth operation matching a kind and a path suffix
// (or every one from the Nth, with Sticky) with an error such as
// syscall.EIO or syscall.ENOSPC. A ShortWrite rule writes half the buffer and
// returns n < len(p) with the error. A failed Sync follows fsyncgate: the
// file's unsynced data is dropped and the next Sync succeeds (a failed
// FileSystem.Sync drops every file's unsynced data, and each such file's
// next Sync reports the loss once), so code that
// retries a failed fsync and then acknowledges loses data, as on Linux. A
// Rule with Crash crashes the filesystem at the matching operation instead,
// for crash points named by kind and path rather than by index.
//
// # Details
//
// Mem has one root and no working directory: "a/b" and "/a/b" name the same
// file. Its error values match the OS implementation's (fs.ErrNotExist,
// fs.ErrExist and the same syscall errnos; a randomized test compares the
// two), including os.Rename's refusal to replace a directory. Files are
// limited to MaxMemFileSize. The model is the POSIX minimum, stricter than
// ext4's journal: each directory's entries become durable only through its own
// sync. A node moved between directories of which only one was synced can, after
// a power loss, be reachable under both names (like a hard link) or neither.
//
// Mem is deterministic: the same operations with the same Rand give the same
// results, and its clock is logical (one second per mutating operation).
package faultfs
