package eventlog

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/warren-dev/warren/eventlog/record"
	"github.com/warren-dev/warren/faultfs"
)

// ErrNoSuchSeq is returned by ReadSeq when the log has no entry with the
// seq asked for.
var ErrNoSuchSeq = errors.New("no entry with this seq in the log")

// ReadSeq returns the entry with the given seq of the log at path. off is
// where the caller last saw it (Entry.Off): when the line there is a good
// entry with that seq it is returned after reading that one line; otherwise
// (0, a stale or wrong hint) the log is scanned from its start. It reads at
// most one line into memory at a time, and does not modify the file.
func ReadSeq(fsys faultfs.FS, path string, seq uint64, off int64) (Entry, error) {
	f, err := faultfs.OpenNoFollow(fsys, path, os.O_RDONLY, 0)
	if err != nil {
		return Entry{}, fmt.Errorf("eventlog: open %s for reading: %w", path, err)
	}
	defer f.Close()
	if e, ok := record.EntryAt(f, off, seq); ok {
		return e, nil
	}
	sc := record.NewScanner(f, path, MaxLineBytes)
	for {
		e, err := sc.Next()
		if errors.Is(err, io.EOF) {
			return Entry{}, fmt.Errorf("eventlog: %s: seq %d: %w", path, seq, ErrNoSuchSeq)
		}
		if err != nil {
			return Entry{}, err
		}
		if e.Seq == seq {
			return e, nil
		}
		if e.Seq > seq {
			return Entry{}, fmt.Errorf("eventlog: %s: seq %d: %w", path, seq, ErrNoSuchSeq)
		}
	}
}

// NewReaderAt is NewReader starting at byte offset off, where the caller
// saw the entry with seq fromSeq (Entry.Off): it checks that the line there
// is that entry and otherwise (or with off 0) reads from the start of the
// file, as NewReader does. Paging through a long log this way reads each
// line once.
func NewReaderAt(fsys faultfs.FS, path string, fromSeq uint64, off int64) (*Reader, error) {
	r, err := NewReader(fsys, path, fromSeq)
	if err != nil || off <= 0 || fromSeq < 2 {
		return r, err
	}
	if _, ok := record.EntryAt(r.f, off, fromSeq); !ok {
		return r, nil
	}
	r.sc = record.NewScannerAt(r.f, path, off, 0, fromSeq-1, 0)
	return r, nil
}
