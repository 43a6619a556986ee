package record

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"
)

// A group is what a pending file holds (see "Groups" in the package
// documentation): its lines, byte for byte as in the log, then a commit
// trailer whose CRC covers every byte before it.

const trailerPrefix = `{"group":`

// AppendTrailer appends the commit trailer to buf, which holds exactly the
// group's n lines.
func AppendTrailer(buf []byte, n int) []byte {
	buf = append(buf, trailerPrefix...)
	buf = strconv.AppendInt(buf, int64(n), 10)
	sum := crc32.Checksum(buf, castagnoli)
	buf = append(buf, crcPrefix...)
	buf = appendHex32(buf, sum)
	return append(buf, '"', '}', '\n')
}

// Group is what ReadGroup found.
type Group struct {
	Add       []byte   // lines continuing the log, ready to append
	Seqs      []uint64 // their seqs
	Skipped   int      // lines the log already holds
	Discarded string   // why the group was discarded whole ("" if it was not)
}

// ReadGroup reads a group (a pending file, named path in errors) against a
// log ending at lastSeq. Bytes that are not a complete group (empty, torn,
// garbage, no valid trailer) are reported as discarded. A complete group
// whose seqs would leave a gap after lastSeq is a *CorruptError.
func ReadGroup(r io.ReaderAt, path string, lastSeq uint64) (Group, error) {
	var g Group
	ls := NewLineScanner(r, 0, MaxLineBytes)
	var lines [][]byte
	var seqs []uint64
	var sum uint32
	for {
		kind, b, _, n, err := ls.Next()
		if err != nil {
			return g, fmt.Errorf("eventlog: read pending file %s: %w", path, err)
		}
		switch kind {
		case KindEOF:
			if len(lines) == 0 {
				g.Discarded = "empty"
			} else {
				g.Discarded = fmt.Sprintf("%d lines without a commit trailer (torn)", len(lines))
			}
			return g, nil
		case KindPartial:
			g.Discarded = fmt.Sprintf("torn: %d bytes after the last newline", n)
			return g, nil
		case KindTooLong:
			g.Discarded = fmt.Sprintf("line %d of %d bytes is over the limit", len(lines)+1, n)
			return g, nil
		}
		if bytes.HasPrefix(b, []byte(trailerPrefix)) {
			if reason := checkTrailer(b, sum, len(lines)); reason != "" {
				g.Discarded = reason
				return g, nil
			}
			// Bytes after a valid trailer are left over from a longer
			// group written before in the same place; the trailer's CRC
			// already proves this group whole.
			break
		}
		e, perr := ParseLine(b)
		if perr != nil {
			g.Discarded = fmt.Sprintf("line %d: %v", len(lines)+1, perr)
			return g, nil
		}
		sum = crc32.Update(sum, castagnoli, b)
		sum = crc32.Update(sum, castagnoli, []byte{'\n'})
		lines = append(lines, append([]byte(nil), b...))
		seqs = append(seqs, e.Seq)
		continue
	}
	for i, b := range lines {
		switch s := seqs[i]; {
		case s <= lastSeq:
			g.Skipped++
		case s == lastSeq+1:
			g.Add = append(g.Add, b...)
			g.Add = append(g.Add, '\n')
			g.Seqs = append(g.Seqs, s)
			lastSeq = s
		default:
			return g, &CorruptError{Path: path, Line: i + 1, Seq: lastSeq + 1,
				Reason: fmt.Sprintf("pending record has seq %d but the log ends at seq %d (a gap); the log was cut back or the pending file belongs to another log", s, lastSeq)}
		}
	}
	return g, nil
}

// checkTrailer validates a trailer line against the running CRC of the
// lines before it and their count; it returns "" when valid.
func checkTrailer(b []byte, sum uint32, lines int) string {
	i := bytes.Index(b, []byte(crcPrefix))
	if i < 0 || len(b) != i+crcSuffixLen {
		return "malformed commit trailer"
	}
	n, err := strconv.Atoi(string(b[len(trailerPrefix):i]))
	if err != nil || n != lines {
		return fmt.Sprintf("commit trailer does not match the %d lines before it", lines)
	}
	want, ok := parseHex32(b[i+len(crcPrefix) : len(b)-2])
	if !ok || crc32.Update(sum, castagnoli, b[:i]) != want || b[len(b)-2] != '"' || b[len(b)-1] != '}' {
		return "commit trailer crc mismatch"
	}
	return ""
}

// EachLine parses complete, already validated lines (a group's Add),
// written to the log at offset off, and hands each entry to fn.
func EachLine(buf []byte, off int64, fn func(Entry) error) error {
	for len(buf) > 0 {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			return fmt.Errorf("a replayed record has no newline")
		}
		e, err := ParseLine(buf[:i])
		if err != nil {
			return err
		}
		e.Off = off
		if err := fn(e); err != nil {
			return err
		}
		buf = buf[i+1:]
		off += int64(i + 1)
	}
	return nil
}
