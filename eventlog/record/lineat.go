package record

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// Reading one line by position: the line a resume point names, and the
// last line before a size a handle knows.

// lineAtBufSize is the first buffer of LineAt.
const lineAtBufSize = 4 << 10

// LineAt returns the complete line (without its newline) starting at off
// of r and the offset just past its newline. It reads a few KiB unless the
// line is longer.
func LineAt(r io.ReaderAt, off int64) ([]byte, int64, error) {
	if off < 0 {
		return nil, 0, fmt.Errorf("negative offset %d", off)
	}
	ls := NewLineScannerSize(r, off, MaxLineBytes, lineAtBufSize)
	kind, line, _, n, err := ls.Next()
	if err != nil {
		return nil, 0, err
	}
	if kind != KindLine {
		return nil, 0, errors.New("no complete line there")
	}
	return line, off + n, nil
}

// CheckLast checks that the bytes of r before size end with the line of
// entry seq (CRC-valid), or that an empty log has seq 0. It reads from the
// end, a few KiB unless the last line is longer.
func CheckLast(r io.ReaderAt, size int64, seq uint64) error {
	if size == 0 {
		if seq != 0 {
			return fmt.Errorf("the file is empty but entry %d was acknowledged", seq)
		}
		return nil
	}
	for chunk := int64(4 << 10); ; chunk *= 8 {
		chunk = min(chunk, size, MaxLineBytes)
		buf := make([]byte, chunk)
		if n, err := r.ReadAt(buf, size-chunk); n != len(buf) {
			return fmt.Errorf("read the last line: %v", err)
		}
		if buf[len(buf)-1] != '\n' {
			return fmt.Errorf("byte %d, the end of entry %d, is not a newline", size-1, seq)
		}
		i := bytes.LastIndexByte(buf[:len(buf)-1], '\n')
		if i < 0 && chunk < size && chunk < MaxLineBytes {
			continue
		}
		e, err := ParseLine(buf[i+1 : len(buf)-1])
		if err != nil {
			return fmt.Errorf("the last line is not entry %d: %v", seq, err)
		}
		if e.Seq != seq {
			return fmt.Errorf("the last line is entry %d, not %d", e.Seq, seq)
		}
		return nil
	}
}

// EntryAt returns the entry of the line at off of r when that line is a
// complete, valid line carrying seq, with Entry.Off set; false otherwise,
// and for an offset of 0 or less (no hint).
func EntryAt(r io.ReaderAt, off int64, seq uint64) (Entry, bool) {
	if off <= 0 {
		return Entry{}, false
	}
	// LineAt reads a few KiB unless the line is longer, not the 64 KiB
	// buffer of a scan through the log: recovery from a checkpoint reads
	// each message pending since it this way.
	line, _, err := LineAt(r, off)
	if err != nil {
		return Entry{}, false
	}
	e, err := ParseLine(line)
	if err != nil || e.Seq != seq {
		return Entry{}, false
	}
	e.Off = off
	return e, true
}

// CheckLineAt checks that a complete, CRC-valid line carrying seq and crc
// (its crc field, see LineCRC) starts at off of r, and returns the offset
// just past it; otherwise an error saying what is there instead.
func CheckLineAt(r io.ReaderAt, off int64, seq uint64, crc uint32) (int64, error) {
	line, end, err := LineAt(r, off)
	if err != nil {
		return 0, err
	}
	e, err := ParseLine(line)
	if err != nil {
		return 0, err
	}
	if e.Seq != seq {
		return 0, fmt.Errorf("the line there has seq %d", e.Seq)
	}
	if lineCRC(line) != crc {
		return 0, fmt.Errorf("the line there has crc %08x, not %08x", lineCRC(line), crc)
	}
	return end, nil
}

// CheckLineEnds checks the two ends of the line of n bytes (its newline
// included) that starts at off of r: it must begin as the writer begins
// entry seq's line and end with crc as its crc field and a newline. It reads
// under 50 bytes whatever n is, and returns off+n. The bytes between are
// not read, so a line that passes is not proven CRC-valid: CheckLineAt
// proves that, reading the whole line. A resumed Open uses this check for
// long lines and leaves the rest to the scrub (eventlog's Verify).
func CheckLineEnds(r io.ReaderAt, off, n int64, seq uint64, crc uint32) (int64, error) {
	const headMax = len(linePrefix) + 20 // the prefix, up to 19 digits and a comma
	if off < 0 || n < int64(headMax+crcSuffixLen+1) || n > MaxLineBytes+1 {
		return 0, fmt.Errorf("no line of %d bytes can be checked at offset %d", n, off)
	}
	head := make([]byte, headMax)
	if k, err := r.ReadAt(head, off); k != len(head) {
		return 0, fmt.Errorf("read the start of the line: %v", err)
	}
	rest, ok := bytes.CutPrefix(head, []byte(linePrefix))
	got, rest, ok2 := parseSeq(rest)
	if !ok || !ok2 || len(rest) == 0 || rest[0] != ',' {
		return 0, errors.New("the bytes there do not start a line")
	}
	if got != seq {
		return 0, fmt.Errorf("the line there has seq %d", got)
	}
	tail := make([]byte, crcSuffixLen+1)
	if k, err := r.ReadAt(tail, off+n-int64(len(tail))); k != len(tail) {
		return 0, fmt.Errorf("read the end of the line: %v", err)
	}
	sum, ok := parseHex32(tail[len(crcPrefix) : len(crcPrefix)+8])
	if !bytes.HasPrefix(tail, []byte(crcPrefix)) || !ok || string(tail[len(tail)-3:]) != "\"}\n" {
		return 0, fmt.Errorf("no crc field and newline end the line at offset %d", off+n)
	}
	if sum != crc {
		return 0, fmt.Errorf("the line there has crc %08x, not %08x", sum, crc)
	}
	return off + n, nil
}

// CheckPrefix checks that the bytes of r before end are complete,
// CRC-valid lines with seqs 1 to seq in order, the last one ending at end.
// It returns nil, a *CorruptError naming path (or a read error).
func CheckPrefix(r io.ReaderAt, path string, end int64, seq uint64) error {
	sc := NewScanner(io.NewSectionReader(r, 0, end), path, MaxLineBytes)
	sc.Check = true
	if err := sc.ScanToEnd(); err != nil {
		return err
	}
	if sc.torn.Bytes > 0 || sc.lastSeq != seq || sc.goodEnd != end {
		reason := fmt.Sprintf("the lines before seq %d do not check out (good lines end at seq %d, offset %d): %s", seq, sc.lastSeq, sc.goodEnd, sc.torn.Reason)
		return &CorruptError{Path: path, Line: sc.lines + 1, Seq: sc.lastSeq + 1, Offset: sc.goodEnd, Reason: reason}
	}
	return nil
}

// WholeEntry reports whether frag, the bytes after the last newline of a
// log, is a complete CRC-valid entry with seq that only lost its newline,
// or has one other byte where its newline belongs (a lost or flipped
// '\n'). It returns the entry and the line without that odd byte.
func WholeEntry(frag []byte, seq uint64) (Entry, []byte, bool) {
	if len(frag) < 2 {
		return Entry{}, nil, false
	}
	body := frag
	e, err := ParseLine(body)
	if err != nil || e.Seq != seq {
		body = frag[:len(frag)-1]
		if e, err = ParseLine(body); err != nil || e.Seq != seq {
			return Entry{}, nil, false
		}
	}
	return e, body, true
}
