package eventlog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/warren-dev/warren/eventlog/record"
	"github.com/warren-dev/warren/faultfs"
)

// Reader iterates over the entries of a log file. It does not modify the
// file: a torn tail ends the iteration, damage in the middle is a
// *CorruptError (ErrCorrupt).
type Reader struct {
	f       faultfs.File
	sc      *record.Scanner
	fromSeq uint64
}

// NewReader opens path for reading entries with seq >= fromSeq.
func NewReader(fsys faultfs.FS, path string, fromSeq uint64) (*Reader, error) {
	f, err := faultfs.OpenNoFollow(fsys, path, os.O_RDONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("eventlog: open %s for reading: %w", path, err)
	}
	return &Reader{f: f, sc: record.NewScanner(f, path, MaxLineBytes), fromSeq: fromSeq}, nil
}

// Next returns the next entry, io.EOF after the last good one, or a
// *CorruptError.
func (r *Reader) Next() (Entry, error) {
	for {
		e, err := r.sc.Next()
		if err != nil {
			return Entry{}, err
		}
		if e.Seq >= r.fromSeq {
			return e, nil
		}
	}
}

// Close closes the file.
func (r *Reader) Close() error { return r.f.Close() }

// ReadAll returns every good entry of the log at path. A torn tail is
// ignored (Open truncates it); damage in the middle is a *CorruptError.
func ReadAll(fsys faultfs.FS, path string) ([]Entry, error) {
	r, err := NewReader(fsys, path, 0)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var out []Entry
	for {
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, e)
	}
}

// Follow yields, in order, each entry with seq >= fromSeq of the log at path
// as it becomes complete (newline-terminated with a matching CRC), waiting
// for the file to grow by calling wait. wait blocks until the file may have
// changed (an fsnotify event, a timer tick) or ctx is done, and returns an
// error to stop following. Follow also waits for the file to be created.
//
// Follow returns ctx.Err() when ctx is done, the error of wait or yield, a
// *CorruptError for damage followed by valid lines, or ErrTruncated when the
// file shrinks below entries already yielded.
func Follow(ctx context.Context, fsys faultfs.FS, path string, fromSeq uint64,
	wait func(ctx context.Context) error, yield func(Entry) error) error {
	var f faultfs.File
	for f == nil {
		if err := ctx.Err(); err != nil {
			return err
		}
		var err error
		f, err = faultfs.OpenNoFollow(fsys, path, os.O_RDONLY, 0)
		if errors.Is(err, fs.ErrNotExist) {
			f = nil
			if err := wait(ctx); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("eventlog: follow %s: %w", path, err)
		}
	}
	defer f.Close()

	// State of the good prefix yielded or skipped so far.
	var lines int
	var lastSeq uint64
	var goodEnd int64
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		st, err := f.Stat()
		if err != nil {
			return fmt.Errorf("eventlog: follow %s: %w", path, err)
		}
		if st.Size() < goodEnd {
			return fmt.Errorf("eventlog: follow %s: file is %d bytes but entries up to seq %d ended at byte %d: %w",
				path, st.Size(), lastSeq, goodEnd, ErrTruncated)
		}
		sc := record.NewScannerAt(f, path, goodEnd, lines, lastSeq, 0)
		for {
			e, err := sc.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return err
			}
			lines, lastSeq, goodEnd = sc.Lines(), sc.LastSeq(), sc.GoodEnd()
			if e.Seq < fromSeq {
				continue
			}
			if err := yield(e); err != nil {
				return err
			}
		}
		// At the end of the complete lines (a partial or damaged tail may
		// follow, still being written or awaiting repair): wait for more.
		if err := wait(ctx); err != nil {
			return err
		}
	}
}
