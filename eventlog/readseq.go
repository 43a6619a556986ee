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

// At locates a line of a log for ReadSeqs: its seq, and the byte offset
// where the caller saw it (a hint; 0 when unknown).
type At struct {
	Seq uint64
	Off int64
}

// ReadSeqs is ReadSeq for several lines of one log, through one open
// handle: fn gets each entry with its index in at, once per index, in no
// promised order (lines at their hints first, then those a stale hint
// missed, found by one scan from the start). A seq the log lacks is an
// error wrapping ErrNoSuchSeq; an error of fn stops the reads.
func ReadSeqs(fsys faultfs.FS, path string, at []At, fn func(i int, e Entry) error) error {
	if len(at) == 0 {
		return nil
	}
	f, err := faultfs.OpenNoFollow(fsys, path, os.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("eventlog: open %s for reading: %w", path, err)
	}
	defer f.Close()
	var missed map[uint64][]int
	for i, a := range at {
		if e, ok := entryAt(f, a); ok {
			if err := fn(i, e); err != nil {
				return err
			}
			continue
		}
		if missed == nil {
			missed = map[uint64][]int{}
		}
		missed[a.Seq] = append(missed[a.Seq], i)
	}
	if len(missed) == 0 {
		return nil
	}
	sc := record.NewScanner(f, path, MaxLineBytes)
	for len(missed) > 0 {
		e, err := sc.Next()
		if errors.Is(err, io.EOF) {
			least := uint64(0)
			for seq := range missed {
				if least == 0 || seq < least {
					least = seq
				}
			}
			return fmt.Errorf("eventlog: %s: seq %d: %w", path, least, ErrNoSuchSeq)
		}
		if err != nil {
			return err
		}
		for _, i := range missed[e.Seq] {
			if err := fn(i, e); err != nil {
				return err
			}
		}
		delete(missed, e.Seq)
	}
	return nil
}

// entryAt is record.EntryAt, where line 1 is also looked for at offset 0
// (EntryAt takes 0 for no hint).
func entryAt(f faultfs.File, a At) (Entry, bool) {
	if a.Seq == 1 && a.Off == 0 {
		line, _, err := record.LineAt(f, 0)
		if err != nil {
			return Entry{}, false
		}
		e, err := record.ParseLine(line)
		if err != nil || e.Seq != 1 {
			return Entry{}, false
		}
		return e, true
	}
	return record.EntryAt(f, a.Off, a.Seq)
}
