package eventlog

import (
	"errors"

	"github.com/warren-dev/warren/eventlog/record"
)

// Sentinel errors. Test for them with errors.Is.
var (
	// ErrCorrupt reports damage in the middle of a log (a bad line followed
	// by a good one, a CRC-valid line with invalid content, or a seq out of
	// order). It is always wrapped in a *CorruptError. Nothing is skipped
	// silently: `warren repair` (Repair) keeps a copy and cuts the log back
	// to its last good entry. It is record.ErrCorrupt.
	ErrCorrupt = record.ErrCorrupt
	// ErrPoisoned is returned by appends on a handle whose earlier write or
	// fsync failed. The handle refuses appends until it is reopened: by
	// itself after Options.HealBackoff, or by Heal (see "Faults and
	// healing" in the package documentation).
	ErrPoisoned = errors.New("event log handle poisoned by an earlier write or fsync failure; it is reopened when the cause is gone")
	// ErrChanged is the cause reported by a handle that found its log
	// changed on disk by something else while it held it (a size or a
	// last line other than those of its last acknowledged entry) when it
	// reopened the file. The handle refuses appends until the log is
	// opened again by Open, which checks the whole file.
	ErrChanged = errors.New("event log changed on disk while open")
	// ErrClosed is returned by appends on a closed handle.
	ErrClosed = errors.New("event log handle is closed")
	// ErrInvalidPath is returned by Open for a path that does not end in
	// ".jsonl".
	ErrInvalidPath = errors.New("event log path must end in .jsonl")
	// ErrInvalidRecord is returned for a record that cannot be logged: an
	// empty or non-UTF-8 event name, data that does not marshal to a JSON
	// object, or a line longer than MaxLineBytes. It is
	// record.ErrInvalidRecord.
	ErrInvalidRecord = record.ErrInvalidRecord
	// ErrResumeMismatch is returned by Open, having changed nothing, when
	// the line Options.Resume names is not in the log as described (the
	// log is shorter, or the line there differs); open without Resume.
	ErrResumeMismatch = errors.New("event log does not hold the line the resume point names")
	// ErrTruncated is returned by Follow when the followed file shrank below
	// entries it had already yielded (it was repaired or replaced).
	ErrTruncated = errors.New("event log shrank below entries already followed")
)

// MaxLineBytes is the longest line (including its newline) the log writes
// or accepts (record.MaxLineBytes). Longer lines are refused by Append and
// treated as damage by readers, which never buffer more than this much of
// one line.
const MaxLineBytes = record.MaxLineBytes

// CorruptError describes damage in the middle of a log or pending file
// (record.CorruptError). It wraps ErrCorrupt.
type CorruptError = record.CorruptError

// Entry is one decoded log line (record.Entry).
type Entry = record.Entry

// Record is one entry to append (record.Record): an event name and its
// data, which must marshal to a JSON object (nil means {}).
type Record = record.Record
