package record

import (
	"fmt"
	"time"
)

// EncodeLine returns the SPEC 3 line of one entry, byte for byte as
// eventlog's Append writes it to a log file (fields in order, CRC-32C,
// trailing newline). Stores other than the file log (store/jetstream) use
// it so that every entry they keep is the same line a file would hold.
// The record is checked as Append checks it (Prepare, ErrInvalidRecord);
// ts is stamped in UTC with milliseconds.
func EncodeLine(seq uint64, ts time.Time, r Record) ([]byte, error) {
	if seq == 0 {
		return nil, fmt.Errorf("%w: seq 0 (seqs start at 1)", ErrInvalidRecord)
	}
	p, err := Prepare(r, MaxLineBytes)
	if err != nil {
		return nil, err
	}
	return AppendLine(nil, seq, ts, &p), nil
}

// DecodeLine checks and decodes one SPEC 3 line, with or without its
// trailing newline, as a log reader does: framing and CRC first, then the
// content. Any failure is an error wrapping ErrCorrupt (a store outside a
// file has no torn tails: a message is whole or absent). Entry.Off is left
// zero; the caller sets its own position hint. The seq order is the
// caller's to check (see CheckNext).
func DecodeLine(line []byte) (Entry, error) {
	if n := len(line); n > 0 && line[n-1] == '\n' {
		line = line[:n-1]
	}
	if len(line)+1 > MaxLineBytes {
		return Entry{}, fmt.Errorf("line of %d bytes is over the %d-byte limit: %w", len(line)+1, MaxLineBytes, ErrCorrupt)
	}
	e, err := ParseLine(line)
	if err != nil {
		return Entry{}, fmt.Errorf("%v: %w", err, ErrCorrupt)
	}
	return e, nil
}

// LineCRC returns the crc field of a line that DecodeLine accepted (with
// or without its newline), as Resume.CRC records it.
func LineCRC(line []byte) uint32 {
	if n := len(line); n > 0 && line[n-1] == '\n' {
		line = line[:n-1]
	}
	if len(line) < crcSuffixLen {
		return 0
	}
	return lineCRC(line)
}

// CheckNext returns an error wrapping ErrCorrupt unless seq is the one
// that must follow last (last+1: no gap, no repeat).
func CheckNext(last, seq uint64) error {
	if seq != last+1 {
		return fmt.Errorf("seq %d where %d was expected: %w", seq, last+1, ErrCorrupt)
	}
	return nil
}

// lineCRC is the crc field of a line that ParseLine accepted.
func lineCRC(line []byte) uint32 {
	v, _ := parseHex32(line[len(line)-crcSuffixLen+len(crcPrefix) : len(line)-2])
	return v
}
