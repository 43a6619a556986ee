package record

import (
	"errors"
	"fmt"
)

// Sentinel errors. Test for them with errors.Is. The eventlog package
// exports the same values (eventlog.ErrCorrupt, eventlog.ErrInvalidRecord).
var (
	// ErrCorrupt reports damage in the middle of a log (a bad line followed
	// by a good one, a CRC-valid line with invalid content, or a seq out of
	// order). It is always wrapped in a *CorruptError. Nothing is skipped
	// silently: `warren repair` (eventlog.Repair) keeps a copy and cuts the
	// log back to its last good entry.
	ErrCorrupt = errors.New("event log corrupt")
	// ErrInvalidRecord is returned for a record that cannot be logged: an
	// empty or non-UTF-8 event name, data that does not marshal to a JSON
	// object, or a line longer than MaxLineBytes.
	ErrInvalidRecord = errors.New("invalid event log record")
)

// MaxLineBytes is the longest line (including its newline) the log writes
// or accepts. Longer lines are refused by Prepare and treated as damage by
// readers, which never buffer more than this much of one line.
const MaxLineBytes = 64 << 20

// CorruptError describes damage in the middle of a log or pending file.
// It wraps ErrCorrupt.
type CorruptError struct {
	// Path is the damaged file.
	Path string
	// Line is the 1-based number of the first damaged line.
	Line int
	// Seq is the seq the damaged line should carry: the last good seq + 1.
	Seq uint64
	// Offset is the byte offset of the damaged line in the file.
	Offset int64
	// Reason says what is wrong with the line.
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("%s: line %d (expected seq %d, byte offset %d): %s: %v; nothing was changed: `warren repair` copies the file aside and cuts it back to its last good entry",
		e.Path, e.Line, e.Seq, e.Offset, e.Reason, ErrCorrupt)
}

// Unwrap makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }
