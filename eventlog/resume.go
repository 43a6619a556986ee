package eventlog

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/warren-dev/warren/eventlog/record"
	"github.com/warren-dev/warren/faultfs"
)

// Resume names a line a caller has already folded (its seq, byte offset,
// CRC and length), so that Open can start its scan right after it:
// recovery of a long log then reads only the lines written since. The
// lines before it are not checked by such an Open; Verify checks them (a
// background scrub).
type Resume struct {
	Seq uint64
	Off int64
	CRC uint32
	// Len is the line's length, its newline included; 0 when the caller
	// does not know it (a checkpoint written before it was recorded).
	Len int64
}

// longLine is the length from which Open checks a resume point's line by
// its ends only (record.CheckLineEnds) when Resume.Len gives it, so that a
// start does not read every long last line (a 1 MB message waiting for a
// gated agent) whole; Verify still reads it whole. A shorter line is read
// whole at once: one read either way.
const longLine = 64 << 10

// check returns the offset just past r's line, or an error wrapping
// ErrResumeMismatch when the line at r.Off is not a complete, CRC-valid
// line carrying r.Seq and r.CRC (and r.Len bytes long, if set). With ends,
// a long line of known length is checked by its ends only (longLine).
func (r *Resume) check(f io.ReaderAt, path string, ends bool) (int64, error) {
	var end int64
	var err error
	if ends && r.Len >= longLine {
		end, err = record.CheckLineEnds(f, r.Off, r.Len, r.Seq, r.CRC)
	} else if end, err = record.CheckLineAt(f, r.Off, r.Seq, r.CRC); err == nil && r.Len > 0 && end-r.Off != r.Len {
		err = fmt.Errorf("the line there is %d bytes long, not %d", end-r.Off, r.Len)
	}
	if err != nil {
		return 0, fmt.Errorf("eventlog: resume %s at seq %d (offset %d): %w: %w", path, r.Seq, r.Off, ErrResumeMismatch, err)
	}
	return end, nil
}

// checkResume checks r against the log at path without changing anything.
func checkResume(fsys faultfs.FS, path string, r *Resume) error {
	f, err := faultfs.OpenNoFollow(fsys, path, os.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("eventlog: resume %s at seq %d: %w: %w", path, r.Seq, ErrResumeMismatch, err)
	}
	defer f.Close()
	_, err = r.check(f, path, true)
	return err
}

// ResumeAt describes the line at off of the log at path as a resume point,
// checking that it is a complete, CRC-valid line carrying seq. Callers
// record it (with the state folded up to it) to pass to a later Open.
func ResumeAt(fsys faultfs.FS, path string, seq uint64, off int64) (Resume, error) {
	f, err := faultfs.OpenNoFollow(fsys, path, os.O_RDONLY, 0)
	if err != nil {
		return Resume{}, fmt.Errorf("eventlog: open %s: %w", path, err)
	}
	defer f.Close()
	line, end, err := record.LineAt(f, off)
	if err != nil {
		return Resume{}, fmt.Errorf("eventlog: %s: no line at offset %d: %w", path, off, err)
	}
	e, err := record.ParseLine(line)
	if err != nil {
		return Resume{}, fmt.Errorf("eventlog: %s: the line at offset %d: %w", path, off, err)
	}
	if e.Seq != seq {
		return Resume{}, fmt.Errorf("eventlog: %s: the line at offset %d has seq %d, not %d", path, off, e.Seq, seq)
	}
	return Resume{Seq: seq, Off: off, CRC: record.LineCRC(line), Len: end - off}, nil
}

// Verify checks the lines of the log at path up to and including the
// resume point r: every line complete and CRC-valid, seqs 1, 2, ... in
// order, and r's line where r says. It changes nothing and returns nil or
// a *CorruptError (or a read error). It is the check Open skips when it
// resumes, for a scrub to run once the log is in use: lines before r are
// never rewritten, so appends meanwhile do not disturb it.
func Verify(fsys faultfs.FS, path string, r Resume) error {
	f, err := faultfs.OpenNoFollow(fsys, path, os.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("eventlog: open %s: %w", path, err)
	}
	defer f.Close()
	end, err := r.check(f, path, false)
	if err != nil {
		return &CorruptError{Path: path, Line: int(r.Seq), Seq: r.Seq, Offset: r.Off, Reason: err.Error()}
	}
	return record.CheckPrefix(f, path, end, r.Seq)
}

func errorsIsCorrupt(err error) bool { return errors.Is(err, ErrCorrupt) }
