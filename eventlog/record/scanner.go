package record

import (
	"errors"
	"fmt"
	"io"
)

// Scanner walks a log from its start (or from a known good line, see
// NewScannerAt), checking each line's CRC, content and seq order. It stops
// at the first damaged line and then decides between a torn tail (nothing
// valid follows) and corruption (something valid follows, or the damaged
// line's own CRC matched).
type Scanner struct {
	// Check keeps nothing of the entries (Next returns them with Data in
	// the read buffer and no Event): for a scan that only verifies.
	Check bool
	// Borrow lends each entry's Data from the read buffer, valid until the
	// next call of Next, instead of a copy.
	Borrow bool

	path    string
	ls      *LineScanner
	names   nameTable
	ts      tsCache
	lines   int    // good lines so far
	lastSeq uint64 // seq of the last good line
	goodEnd int64  // offset just past the last good line
	// Set once the scan has reached its end.
	done   bool
	endErr error // io.EOF or a *CorruptError
	torn   Torn
	// badContent is set when the scan stopped at a line whose CRC matched
	// but whose content or seq is wrong: never a torn write.
	badContent bool
}

// Torn describes damage at the end of the scanned bytes: bytes after the
// good prefix with no valid line among them.
type Torn struct {
	// Bytes is the length of the damaged region (0: none), Reason what is
	// wrong with its first line.
	Bytes  int64
	Reason string
	// Partial says the damage is only a fragment after the last newline:
	// the one shape a torn write leaves that no pending group need cover.
	Partial bool
}

// NewScanner scans r from offset 0, path naming it in errors, with lines
// of at most limit bytes (MaxLineBytes; less in tests).
func NewScanner(r io.ReaderAt, path string, limit int) *Scanner {
	return &Scanner{path: path, ls: NewLineScanner(r, 0, limit)}
}

// NewScannerIn is NewScanner reading into buf (its whole capacity; a
// new buffer when it has none, or when a line outgrows it). buf is the
// scanner's until the caller is done with it and every line it returned.
func NewScannerIn(r io.ReaderAt, path string, limit int, buf []byte) *Scanner {
	if cap(buf) == 0 || cap(buf) > limit {
		return NewScanner(r, path, limit)
	}
	return &Scanner{path: path, ls: &LineScanner{r: r, limit: limit, buf: buf[:cap(buf)]}}
}

// NewScannerAt scans r from offset off, just past a good line with seq
// lastSeq that was line number lines of the file (0 when unknown), with a
// first buffer of size bytes (small for a short tail; 0 for the default).
func NewScannerAt(r io.ReaderAt, path string, off int64, lines int, lastSeq uint64, size int) *Scanner {
	return &Scanner{path: path, ls: NewLineScannerSize(r, off, MaxLineBytes, size),
		lines: lines, lastSeq: lastSeq, goodEnd: off}
}

// Lines is the number of good lines so far (counted from the start given
// to NewScannerAt).
func (s *Scanner) Lines() int { return s.lines }

// LastSeq is the seq of the last good line (0 before the first).
func (s *Scanner) LastSeq() uint64 { return s.lastSeq }

// GoodEnd is the offset just past the last good line.
func (s *Scanner) GoodEnd() int64 { return s.goodEnd }

// Torn describes the damage the scan found at the end (zero when none).
func (s *Scanner) Torn() Torn { return s.torn }

// BadContent reports whether the scan stopped at a line whose CRC matched
// but whose content or seq is wrong: never a torn write.
func (s *Scanner) BadContent() bool { return s.badContent }

// Next returns the next good entry, io.EOF at the end of the good prefix
// (a torn tail ends it), or a *CorruptError.
func (s *Scanner) Next() (Entry, error) {
	if s.done {
		return Entry{}, s.endErr
	}
	kind, line, off, n, err := s.ls.Next()
	if err != nil {
		return Entry{}, fmt.Errorf("eventlog: read %s: %w", s.path, err)
	}
	switch kind {
	case KindEOF:
		return s.finish(io.EOF)
	case KindPartial:
		s.torn = Torn{Bytes: n, Reason: "last line has no newline", Partial: true}
		return s.finish(io.EOF)
	case KindTooLong:
		return s.damaged(off, n, fmt.Sprintf("line of %d bytes is over the %d-byte limit", n, s.ls.limit))
	}
	e, perr := parseLineMode(line, lineMode{check: s.Check, borrow: s.Borrow, names: &s.names, ts: &s.ts})
	if perr != nil {
		if errors.Is(perr, errBadCRC) {
			return s.damaged(off, n, perr.Error())
		}
		s.badContent = true
		return s.finish(s.corrupt(off, perr.Error()))
	}
	if e.Seq != s.lastSeq+1 {
		s.badContent = true
		return s.finish(s.corrupt(off, fmt.Sprintf("seq %d out of order after seq %d", e.Seq, s.lastSeq)))
	}
	s.lines++
	s.lastSeq = e.Seq
	s.goodEnd = off + n
	e.Off = off
	return e, nil
}

func (s *Scanner) finish(err error) (Entry, error) {
	s.done = true
	s.endErr = err
	return Entry{}, err
}

func (s *Scanner) corrupt(off int64, reason string) *CorruptError {
	return &CorruptError{Path: s.path, Line: s.lines + 1, Seq: s.lastSeq + 1, Offset: off, Reason: reason}
}

// damaged handles a line that failed its CRC (or is over-long) at off: it
// reads the rest of the file and reports corruption if any line after it has
// a valid CRC, else a torn tail.
func (s *Scanner) damaged(off, n int64, reason string) (Entry, error) {
	total := n
	for {
		kind, line, _, ln, err := s.ls.Next()
		if err != nil {
			return Entry{}, fmt.Errorf("eventlog: read %s: %w", s.path, err)
		}
		if kind == KindEOF {
			break
		}
		total += ln
		if kind == KindPartial {
			break // the fragment after the last newline is the end of the file
		}
		if kind == KindTooLong {
			continue
		}
		if _, perr := ParseLine(line); perr == nil || !errors.Is(perr, errBadCRC) {
			return s.finish(s.corrupt(off, reason+", and a line with a valid crc follows it"))
		}
	}
	s.torn = Torn{Bytes: total, Reason: reason}
	return s.finish(io.EOF)
}

// ScanToEnd runs the scanner to its end and returns its final error:
// nil for a clean or torn-tail log, a *CorruptError, or a read error.
func (s *Scanner) ScanToEnd() error {
	for {
		_, err := s.Next()
		if err == nil {
			continue
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		return err
	}
}
