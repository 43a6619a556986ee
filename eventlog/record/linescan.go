package record

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// Kind classifies what LineScanner.Next found.
type Kind int

const (
	KindLine    Kind = iota // a complete line (without its newline)
	KindTooLong             // a complete line over the limit; its bytes are not kept
	KindPartial             // bytes after the last newline, up to the current end of file
	KindEOF                 // nothing left
)

// LineScanner reads newline-terminated lines from an io.ReaderAt starting at
// an offset. It never buffers more than limit bytes of one line, so garbage
// without newlines cannot make it allocate without bound.
type LineScanner struct {
	r     io.ReaderAt
	limit int   // longest accepted line, newline included
	off   int64 // file offset of buf[start]
	buf   []byte
	start int
	end   int
	// skipping is set while discarding an over-long line; skipOff is that
	// line's offset and skipped the bytes discarded so far.
	skipping bool
	skipOff  int64
	skipped  int64
}

// NewLineScanner reads lines of at most limit bytes from r, starting at
// offset off.
func NewLineScanner(r io.ReaderAt, off int64, limit int) *LineScanner {
	return NewLineScannerSize(r, off, limit, defaultBufSize)
}

// defaultBufSize is the first buffer of a LineScanner reading a whole log.
const defaultBufSize = 64 << 10

// NewLineScannerSize starts with a buffer of size bytes (it grows for
// longer lines): small for reading one line or a short tail. A size of 0
// or less is the default of NewLineScanner.
func NewLineScannerSize(r io.ReaderAt, off int64, limit, size int) *LineScanner {
	if size <= 0 {
		size = defaultBufSize
	}
	if size > limit {
		size = limit
	}
	return &LineScanner{r: r, limit: limit, off: off, buf: make([]byte, size)}
}

// Next returns the next line and its file offset. For KindLine the slice is
// valid until the next call. For KindTooLong and KindPartial, n is the
// length of the line or fragment. A KindPartial fragment is not consumed: a
// later call re-reads it, so a follower can wait for the rest of the line.
func (s *LineScanner) Next() (kind Kind, line []byte, off int64, n int64, err error) {
	for {
		if s.skipping {
			if i := bytes.IndexByte(s.buf[s.start:s.end], '\n'); i >= 0 {
				s.skipping = false
				s.consume(i + 1)
				total := s.skipped + int64(i) + 1
				return KindTooLong, nil, s.skipOff, total, nil
			}
			s.skipped += int64(s.end - s.start)
			s.consume(s.end - s.start)
		} else if i := bytes.IndexByte(s.buf[s.start:s.end], '\n'); i >= 0 {
			lineOff := s.off
			line := s.buf[s.start : s.start+i]
			s.consume(i + 1)
			return KindLine, line, lineOff, int64(i + 1), nil
		} else if s.end-s.start >= s.limit {
			// limit bytes and no newline: the line is over the limit.
			s.skipping = true
			s.skipOff = s.off
			s.skipped = int64(s.end - s.start)
			s.consume(s.end - s.start)
		}
		got, rerr := s.fill()
		if got > 0 {
			continue
		}
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return 0, nil, 0, 0, fmt.Errorf("read at offset %d: %w", s.off+int64(s.end-s.start), rerr)
		}
		// End of file.
		if s.skipping {
			return KindPartial, nil, s.skipOff, s.skipped, nil
		}
		if s.end > s.start {
			return KindPartial, nil, s.off, int64(s.end - s.start), nil
		}
		return KindEOF, nil, s.off, 0, nil
	}
}

// consume drops k bytes from the front of the buffered data.
func (s *LineScanner) consume(k int) {
	s.start += k
	s.off += int64(k)
	if s.start == s.end {
		s.start, s.end = 0, 0
	}
}

// fill reads more data after the buffered bytes, compacting or growing the
// buffer (up to limit) as needed.
func (s *LineScanner) fill() (int, error) {
	if s.end == len(s.buf) {
		if s.start > 0 {
			copy(s.buf, s.buf[s.start:s.end])
			s.end -= s.start
			s.start = 0
		} else {
			size := 2 * len(s.buf)
			if size > s.limit {
				size = s.limit
			}
			nb := make([]byte, size)
			copy(nb, s.buf[:s.end])
			s.buf = nb
		}
	}
	n, err := s.r.ReadAt(s.buf[s.end:], s.off+int64(s.end-s.start))
	s.end += n
	return n, err
}
