package eventlog

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/warren-dev/warren/eventlog/record"
	"github.com/warren-dev/warren/faultfs"
)

// What Open does with damage after the good prefix of a log is step 2 of
// "Open and recovery" in the package documentation: keep a whole last
// entry that lost its newline, cut (after copying aside) only a region the
// pending file covers or a fragment with no newline, report anything else
// as corruption without changing the file.

// repairTail handles the bytes after sc's good prefix. scanErr is the
// scan's *CorruptError, or nil when nothing valid follows the damage.
func (l *Log) repairTail(f faultfs.File, sc *record.Scanner, scanErr error) error {
	pc, perr := l.readPendingFor(sc.LastSeq())
	if perr != nil {
		// A pending file that cannot continue the log fails Open; the log
		// is left as it was found. Damage in the log itself is the first
		// thing to report.
		switch {
		case scanErr != nil:
			return scanErr
		case !sc.Torn().Partial:
			return l.notTorn(sc)
		}
		return perr
	}
	if sc.Torn().Partial {
		kept, err := l.keepWholeEntry(f, sc)
		if kept || err != nil {
			return err
		}
	}
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("eventlog: stat %s: %w", l.path, err)
	}
	region := st.Size() - sc.GoodEnd()
	covered := len(pc.Add) > 0 && region <= int64(len(pc.Add)) && !sc.BadContent()
	reason := sc.Torn().Reason
	switch {
	case covered:
		if scanErr != nil {
			var ce *CorruptError
			errors.As(scanErr, &ce)
			reason = ce.Reason
		}
		reason += fmt.Sprintf("; the pending file covers it (seqs %d-%d)", pc.Seqs[0], pc.Seqs[len(pc.Seqs)-1])
	case scanErr != nil:
		return scanErr
	case !sc.Torn().Partial:
		return l.notTorn(sc)
	}
	return l.cutTail(f, sc.GoodEnd(), st.Size(), reason, sc.LastSeq())
}

// notTorn is the corruption error for damage at the end of the log that no
// pending file covers.
func (l *Log) notTorn(sc *record.Scanner) error {
	return &CorruptError{Path: l.path, Line: sc.Lines() + 1, Seq: sc.LastSeq() + 1, Offset: sc.GoodEnd(),
		Reason: sc.Torn().Reason + ", in complete lines at the end of the log, which no pending file covers (a torn write leaves only a partial last line or a region the pending file of the write covers)"}
}

// readPendingFor reads the pending file against a log ending at lastSeq:
// a missing file is an empty result; a group that would leave a gap is a
// *CorruptError.
func (l *Log) readPendingFor(lastSeq uint64) (record.Group, error) {
	pf, err := faultfs.OpenNoFollow(l.fsys, l.pendingPath, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return record.Group{}, nil
	}
	if err != nil {
		return record.Group{}, fmt.Errorf("eventlog: open pending file %s: %w", l.pendingPath, err)
	}
	defer pf.Close()
	return record.ReadGroup(pf, l.pendingPath, lastSeq)
}

// keepWholeEntry keeps a trailing fragment that is a complete CRC-valid
// entry with the next seq, missing only its newline (or with one other
// byte where the newline belongs), by restoring the newline. It reports
// whether it did. The replaced byte is cut and made durable before the
// newline is appended, so a crash in between leaves the entry without a
// newline, which the next Open keeps the same way.
func (l *Log) keepWholeEntry(f faultfs.File, sc *record.Scanner) (bool, error) {
	n := sc.Torn().Bytes
	if n > int64(MaxLineBytes) || n < 2 {
		return false, nil
	}
	frag := make([]byte, n)
	if _, err := f.ReadAt(frag, sc.GoodEnd()); err != nil && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("eventlog: read the last line of %s: %w", l.path, err)
	}
	e, body, ok := record.WholeEntry(frag, sc.LastSeq()+1)
	if !ok {
		return false, nil
	}
	if len(body) < len(frag) {
		l.logger.Warn("the last entry of the event log has a damaged newline; restoring it",
			"path", l.path, "seq", e.Seq, "offset", sc.GoodEnd()+int64(len(body)), "byte", fmt.Sprintf("%#02x", frag[len(body)]))
		if err := f.Truncate(sc.GoodEnd() + int64(len(body))); err != nil {
			return false, fmt.Errorf("eventlog: cut the damaged newline of %s: %w", l.path, err)
		}
		if err := f.Sync(); err != nil {
			return false, fmt.Errorf("eventlog: fsync %s: %w", l.path, err)
		}
	} else {
		l.logger.Warn("the last entry of the event log lacks its newline; restoring it",
			"path", l.path, "seq", e.Seq, "offset", sc.GoodEnd())
	}
	if w, err := f.Write([]byte{'\n'}); err != nil || w != 1 {
		return false, fmt.Errorf("eventlog: restore the newline of the last entry of %s: %w", l.path, errors.Join(err, io.ErrShortWrite))
	}
	if l.replay != nil {
		if err := l.replay(e); err != nil {
			return false, fmt.Errorf("eventlog: replaying %s at seq %d: %w", l.path, e.Seq, err)
		}
	}
	l.lastSeq = e.Seq
	return true, nil
}

// cutTail copies the bytes of the log from off to size durably aside, then
// truncates the log to off.
func (l *Log) cutTail(f faultfs.File, off, size int64, reason string, lastSeq uint64) error {
	stamp := l.now().UTC().Format(stampLayout)
	aside, err := copyAside(l.fsys, f, l.path, ".torn-"+stamp, off, size)
	if err != nil {
		return err
	}
	l.logger.Warn("cutting the torn tail of an event log; the cut bytes are kept", "path", l.path,
		"offset", off, "bytes", size-off, "reason", reason, "last_seq", lastSeq, "kept_in", aside)
	if err := f.Truncate(off); err != nil {
		return fmt.Errorf("eventlog: truncate torn tail of %s to %d bytes: %w (the cut bytes are in %s)", l.path, off, err, aside)
	}
	return nil
}
