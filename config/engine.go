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
	// (each at most two descriptors; eventlog.Files).
	DefaultMaxOpenLogs = 512
	// DefaultTakeoverEvery is how often a daemon on a cluster store looks
	// for agents (and, standing by, for the USER inbox) whose owner's lease
	// lapsed.
	DefaultTakeoverEvery = 250 * time.Millisecond
)
