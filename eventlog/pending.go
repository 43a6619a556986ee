package eventlog

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"strconv"

	"github.com/warren-dev/warren/faultfs"
)

// The pending file holds one group: its log lines, byte for byte, then a
// commit trailer
//
//	{"group":<number of lines>,"crc":"<crc32c of every byte before `,"crc":`>"}\n
//
// whose CRC covers the lines and the trailer's own `{"group":N`. A pending
// file without a valid trailer was torn before its fsync returned, so its
// group was never written to the log and is discarded whole; this keeps a
// multi-record batch all or none even when a tear ends on a line boundary.

const trailerPrefix = `{"group":`

// appendTrailer appends the commit trailer to buf, which holds exactly the
// group's n lines.
func appendTrailer(buf []byte, n int) []byte {
	buf = append(buf, trailerPrefix...)
	buf = strconv.AppendInt(buf, int64(n), 10)
	sum := crc32.Checksum(buf, castagnoli)
	buf = append(buf, crcPrefix...)
	buf = appendHex32(buf, sum)
	return append(buf, '"', '}', '\n')
}

// pendingContent is what readPending found.
type pendingContent struct {
	add       []byte   // lines continuing the log, ready to append
	seqs      []uint64 // their seqs
	skipped   int      // lines the log already holds
	discarded string   // why the file was discarded whole ("" if it was not)
}

// readPending reads a pending file against a log ending at lastSeq. A file
// that is not a complete group (empty, torn, garbage, no valid trailer) is
// reported as discarded. A complete group whose seqs would leave a gap
// after lastSeq is a *CorruptError.
func readPending(r io.ReaderAt, path string, lastSeq uint64) (pendingContent, error) {
	var pc pendingContent
	ls := newLineScanner(r, 0, MaxLineBytes)
	var lines [][]byte
	var seqs []uint64
	var sum uint32
	for {
		kind, b, _, n, err := ls.next()
		if err != nil {
			return pc, fmt.Errorf("eventlog: read pending file %s: %w", path, err)
		}
		switch kind {
		case kindEOF:
			if len(lines) == 0 {
				pc.discarded = "empty"
			} else {
				pc.discarded = fmt.Sprintf("%d lines without a commit trailer (torn)", len(lines))
			}
			return pc, nil
		case kindPartial:
			pc.discarded = fmt.Sprintf("torn: %d bytes after the last newline", n)
			return pc, nil
		case kindTooLong:
			pc.discarded = fmt.Sprintf("line %d of %d bytes is over the limit", len(lines)+1, n)
			return pc, nil
		}
		if bytes.HasPrefix(b, []byte(trailerPrefix)) {
			if reason := checkTrailer(b, sum, len(lines)); reason != "" {
				pc.discarded = reason
				return pc, nil
			}
			// Bytes after a valid trailer are left over from a longer
			// group written before in the same place; the trailer's CRC
			// already proves this group whole.
			break
		}
		e, perr := parseLine(b)
		if perr != nil {
			pc.discarded = fmt.Sprintf("line %d: %v", len(lines)+1, perr)
			return pc, nil
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
			pc.skipped++
		case s == lastSeq+1:
			pc.add = append(pc.add, b...)
			pc.add = append(pc.add, '\n')
			pc.seqs = append(pc.seqs, s)
			lastSeq = s
		default:
			return pc, &CorruptError{Path: path, Line: i + 1, Seq: lastSeq + 1,
				Reason: fmt.Sprintf("pending record has seq %d but the log ends at seq %d (a gap); the log was cut back or the pending file belongs to another log", s, lastSeq)}
		}
	}
	return pc, nil
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

// replayPending appends the records of a complete pending group that the
// log lacks and removes the pending file. Before touching the log it makes
// the pending file and its directory entry durable (a crash may have hit
// before either was), so a crash during the replay finds it again. Running
// it again after a crash at any point gives the same log.
func (l *Log) replayPending(f faultfs.File, size int64) error {
	pf, err := faultfs.OpenNoFollow(l.fsys, l.pendingPath, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("eventlog: open pending file %s: %w", l.pendingPath, err)
	}
	pc, err := readPending(pf, l.pendingPath, l.lastSeq)
	if err == nil && len(pc.add) > 0 {
		if err = pf.Sync(); err != nil {
			err = fmt.Errorf("eventlog: fsync pending file %s before replay: %w", l.pendingPath, err)
		} else if err = l.fsys.SyncDir(l.dir); err != nil {
			err = fmt.Errorf("eventlog: fsync directory %s before replay: %w", l.dir, err)
		}
	}
	_ = pf.Close()
	if err != nil {
		return err
	}
	if pc.discarded != "" {
		l.logger.Warn("discarding incomplete pending file (its group was never acknowledged)",
			"path", l.pendingPath, "reason", pc.discarded)
	} else {
		l.logger.Info("replaying pending file", "path", l.pendingPath,
			"append", len(pc.seqs), "already_in_log", pc.skipped)
	}
	if len(pc.add) > 0 {
		n, err := f.Write(pc.add)
		if err == nil && n != len(pc.add) {
			err = fmt.Errorf("wrote %d of %d bytes: %w", n, len(pc.add), io.ErrShortWrite)
		}
		if err != nil {
			return fmt.Errorf("eventlog: replay %s into %s: %w", l.pendingPath, l.path, err)
		}
		if err := f.Sync(); err != nil {
			return fmt.Errorf("eventlog: fsync %s after replaying %s: %w", l.path, l.pendingPath, err)
		}
		l.lastSeq = pc.seqs[len(pc.seqs)-1]
		if l.replay != nil {
			if err := replayLines(pc.add, size, l.replay); err != nil {
				return fmt.Errorf("eventlog: replaying the pending records of %s: %w", l.path, err)
			}
		}
	}
	if err := l.fsys.Remove(l.pendingPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("eventlog: remove pending file %s: %w", l.pendingPath, err)
	}
	if err := l.fsys.SyncDir(l.dir); err != nil {
		return fmt.Errorf("eventlog: fsync directory %s after removing %s: %w", l.dir, l.pendingPath, err)
	}
	return nil
}

// replayLines parses complete, already validated lines, written to the log
// at offset off, and hands each entry to replay.
func replayLines(buf []byte, off int64, replay func(Entry) error) error {
	for len(buf) > 0 {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			return fmt.Errorf("a replayed record has no newline")
		}
		e, err := parseLine(buf[:i])
		if err != nil {
			return err
		}
		e.Off = off
		if err := replay(e); err != nil {
			return err
		}
		buf = buf[i+1:]
		off += int64(i + 1)
	}
	return nil
}
