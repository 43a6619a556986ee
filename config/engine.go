package config

import "time"

// The engine's built-in policy: the values the daemon gives the agent
// engine (engine.CoreOptions) that config.json does not set. The engine
// has no defaults of its own: a zero there means off or is refused, so
// every default lives here (and the default provider in cmd/warren,
// builtins.DefaultProvider).
const (
	// DefaultCheckpointEvery is how many entries an agent's log grows by
	// before its checkpoint is rewritten (engine/doc.go, "Checkpoints").
	DefaultCheckpointEvery = 256
	// DefaultSessionSaveDelay is how long session.json's background writer
	// coalesces changes. A snapshot write (temp file, fsync, rename,
	// directory fsync) costs about four log fsyncs of disk time and a new
	// inode; the log carries every change durably, so the snapshot trails
	// it by up to this much (docs/DECISIONS.md).
	DefaultSessionSaveDelay = time.Second
	// DefaultMaxOpenLogs caps the event logs holding open file handles
	// (each at most two descriptors; eventlog.Files) when the file
	// descriptor limit leaves room for it; MaxOpenLogsFor sizes the cap
	// the daemon runs with from that limit.
	DefaultMaxOpenLogs = 512
	// MinOpenLogs is the least cap MaxOpenLogsFor gives, however low the
	// limit.
	MinOpenLogs = 16
	// MinFileReserve is the least number of descriptors MaxOpenLogsFor
	// leaves to everything but the logs.
	MinFileReserve = 128
	// DefaultTakeoverEvery is how often a daemon on a cluster store looks
	// for agents (and, standing by, for the USER inbox) whose owner's lease
	// lapsed.
	DefaultTakeoverEvery = 250 * time.Millisecond
)

// MaxOpenLogsFor is the open-log cap for a daemon whose file descriptor
// limit (the soft RLIMIT_NOFILE, once raised to the hard one) is nofile.
// Each open log may take two descriptors; the rest of the daemon needs
// room too: client connections (256 served, 8 control, pending ones), the
// pipes and stderr.log of agent processes (three or four each), the
// socket, config watcher, daemon.log and lock, and the transient files of
// snapshot, checkpoint and directory syncs. So it reserves a quarter of
// the limit, at least MinFileReserve, and gives the logs half of the rest:
//
//	reserve = max(MinFileReserve, nofile/4)
//	cap     = min(DefaultMaxOpenLogs, (nofile - reserve) / 2), at least MinOpenLogs
//
// 1,024 descriptors give 384 logs, 300 give 86, 4,096 or more the default
// 512; 0 (unknown) gives the default.
func MaxOpenLogsFor(nofile uint64) int {
	if nofile == 0 {
		return DefaultMaxOpenLogs
	}
	reserve := max(uint64(MinFileReserve), nofile/4)
	if nofile <= reserve+2*MinOpenLogs {
		return MinOpenLogs
	}
	return int(min(uint64(DefaultMaxOpenLogs), (nofile-reserve)/2))
}
