package eventlog

import (
	"errors"
	"fmt"
	"io"
)

// logScanner walks a log from its start, checking each line's CRC, content
// and seq order. It stops at the first damaged line and then decides between
// a torn tail (nothing valid follows) and corruption (something valid
// follows, or the damaged line's own CRC matched).
type logScanner struct {
	path  string
	ls    *lineScanner
	check bool // only checking: entries are not kept (see lineMode)
	// borrow lends each entry's Data from the read buffer (see lineMode).
	borrow  bool
	names   nameTable
	lines   int    // good lines so far
	lastSeq uint64 // seq of the last good line
	goodEnd int64  // offset just past the last good line
	// Set once the scan has reached its end.
	done   bool
	endErr error // io.EOF or a *CorruptError
	// tornBytes/tornReason describe damage at the end of the file (bytes
	// after goodEnd with no valid line among them). tornPartial says the
	// damage is only a fragment after the last newline: the one shape a
	// torn write leaves that no pending file need cover.
	tornBytes   int64
	tornReason  string
	tornPartial bool
	// badContent is set when the scan stopped at a line whose CRC matched
	// but whose content or seq is wrong: never a torn write.
	badContent bool
}

func newLogScanner(r io.ReaderAt, path string, limit int) *logScanner {
	return &logScanner{path: path, ls: newLineScanner(r, 0, limit)}
}

// next returns the next good entry, io.EOF at the end of the good prefix
// (a torn tail ends it), or a *CorruptError.
func (s *logScanner) next() (Entry, error) {
	if s.done {
		return Entry{}, s.endErr
	}
	kind, line, off, n, err := s.ls.next()
	if err != nil {
		return Entry{}, fmt.Errorf("eventlog: read %s: %w", s.path, err)
	}
	switch kind {
	case kindEOF:
		return s.finish(io.EOF)
	case kindPartial:
		s.tornBytes = n
		s.tornReason = "last line has no newline"
		s.tornPartial = true
		return s.finish(io.EOF)
	case kindTooLong:
		return s.damaged(off, n, fmt.Sprintf("line of %d bytes is over the %d-byte limit", n, s.ls.limit))
	}
	e, perr := parseLineMode(line, lineMode{check: s.check, borrow: s.borrow, names: &s.names})
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

func (s *logScanner) finish(err error) (Entry, error) {
	s.done = true
	s.endErr = err
	return Entry{}, err
}

func (s *logScanner) corrupt(off int64, reason string) *CorruptError {
	return &CorruptError{Path: s.path, Line: s.lines + 1, Seq: s.lastSeq + 1, Offset: off, Reason: reason}
}

// damaged handles a line that failed its CRC (or is over-long) at off: it
// reads the rest of the file and reports corruption if any line after it has
// a valid CRC, else a torn tail.
func (s *logScanner) damaged(off, n int64, reason string) (Entry, error) {
	total := n
	for {
		kind, line, _, ln, err := s.ls.next()
		if err != nil {
			return Entry{}, fmt.Errorf("eventlog: read %s: %w", s.path, err)
		}
		if kind == kindEOF {
			break
		}
		total += ln
		if kind == kindPartial {
			break // the fragment after the last newline is the end of the file
		}
		if kind == kindTooLong {
			continue
		}
		if _, perr := parseLine(line); perr == nil || !errors.Is(perr, errBadCRC) {
			return s.finish(s.corrupt(off, reason+", and a line with a valid crc follows it"))
		}
	}
	s.tornBytes = total
	s.tornReason = reason
	return s.finish(io.EOF)
}

// scanToEnd runs the scanner to its end and returns its final error:
// nil for a clean or torn-tail log, a *CorruptError, or a read error.
func (s *logScanner) scanToEnd() error {
	for {
		_, err := s.next()
		if err == nil {
			continue
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		return err
	}
}
