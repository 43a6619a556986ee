package eventlog

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/warren-dev/warren/faultfs"
)

// Syncer shares device flushes between logs (Options.Syncer). Every fsync
// of the write protocol (a group's pending file, then its log) goes through
// it: the fsyncs asked for while a flush is running wait and are done
// together by the next one, as one syncfs(2) of the filesystem holding
// them instead of one fsync per file. A single fsync (no other log asked
// meanwhile) stays a plain fsync of its file.
//
// What it changes is the cost, not the protocol: syncfs makes every file
// and directory of the filesystem durable, a superset of each fsync it
// replaces, and a caller still returns only after a flush that began after
// its write returned. So each step of the write protocol and of recovery
// (doc.go) holds as written, log by log.
//
// Failures. A failed syncfs fails every fsync it stood for. It may also
// have dropped the unsynced data of logs that were not in its round (a
// syncfs writes back everything), and the kernel reports a failure to
// each syncfs handle once. So each filesystem's lane counts its failed
// flushes, a log notes the count before each write (mark), and a sync
// whose flush succeeded still fails if a flush of that filesystem failed
// after the mark. Each failed log is poisoned and reopened (fsyncgate:
// none retries on its handle).
//
// Each filesystem (faultfs.Device of each log, read at Open) has its own
// lane and keeps one faultfs.FileSystem open, so that a writeback failure
// between two flushes is reported to the next. A log on another mount is
// never counted as flushed by the home's. Where FS.OpenFS is unsupported
// (not Linux, a kernel before 5.8, a filesystem whose syncfs is not
// trusted) the lane syncs the files of a round one by one, each caller
// getting its own file's result.
//
// A Syncer is safe for concurrent use; Close releases the lanes' handles.
// The zero value is not usable; call NewSyncer.
type Syncer struct {
	fsys faultfs.FS
	// flushes counts the flushes (syncfs, or fsyncs of single files) and
	// asked the fsyncs they stood for.
	flushes, asked atomic.Int64

	mu    sync.Mutex
	lanes map[uint64]*syncLane
}

// NewSyncer returns a Syncer for logs on fsys.
func NewSyncer(fsys faultfs.FS) *Syncer {
	return &Syncer{fsys: fsys, lanes: map[uint64]*syncLane{}}
}

// errEarlierFlush fails a sync whose write a failed flush may have dropped.
var errEarlierFlush = errors.New("eventlog: a flush of this filesystem failed after the write: its data may be lost")

// lane returns the lane of dev, opening it (FS.OpenFS on dir) the first
// time. s.mu must be held.
func (s *Syncer) lane(dev uint64, dir string) *syncLane {
	ln := s.lanes[dev]
	if ln == nil {
		ln = &syncLane{}
		fs, err := s.fsys.OpenFS(dir)
		switch {
		case err == nil:
			ln.fs = fs
		case errors.Is(err, errors.ErrUnsupported):
			// file by file
		default:
			return ln // not kept: the next call tries to open it again
		}
		s.lanes[dev] = ln
	}
	return ln
}

// mark is what a log notes before a write it will sync: the failed
// flushes of dev's filesystem so far.
func (s *Syncer) mark(dev uint64, dir string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lane(dev, dir).failed
}

// wholeFlushes reports whether dev's filesystem is flushed whole (syncfs)
// rather than file by file.
func (s *Syncer) wholeFlushes(dev uint64, dir string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lane(dev, dir).fs != nil
}

// sync makes f's written data durable, with the fsyncs other logs on the
// same filesystem (dev) ask for meanwhile. dir is a directory on that
// filesystem (the log's); mark is the caller's mark from before its write.
// With whole the caller needs more than f: the directory entries it made
// too, so the flush is a syncfs even if no other log asks. It returns when
// a flush that started after the call has completed, with that flush's
// error for f (or errEarlierFlush), and reports whether the flush was a
// syncfs (all: every file and directory is durable); when it was not (a
// lone fsync, or file by file), only f was synced.
func (s *Syncer) sync(dev uint64, dir string, f faultfs.File, whole bool, mark uint64) (all bool, err error) {
	s.mu.Lock()
	ln := s.lane(dev, dir)
	r := ln.next
	if r == nil {
		r = &syncRound{done: make(chan struct{}), lead: make(chan struct{}, 1)}
		ln.next = r
	}
	i := len(r.files)
	r.files = append(r.files, f)
	r.whole = r.whole || whole
	if !ln.running {
		ln.running = true
		s.mu.Unlock()
		s.lead(ln, r)
	} else {
		s.mu.Unlock()
		select {
		case <-r.done:
		case <-r.lead:
			s.lead(ln, r)
		}
	}
	if err := r.errs[i]; err != nil {
		return false, err
	}
	if r.failedAfter > mark {
		return false, fmt.Errorf("%w (%d failed flush(es) since)", errEarlierFlush, r.failedAfter-mark)
	}
	return r.all, nil
}

// maxGatherYields bounds how often a round's leader yields to let callers
// about to ask (those the last flush released) join its round first.
const maxGatherYields = 8

// lead runs round r, which is ln.next: while r keeps growing it yields
// (callers the previous flush released are typically a few microseconds
// from asking again, and a flush costs a few hundred), then closes r to
// newcomers, flushes it, and hands the lane to the round that gathered
// meanwhile (one of its callers leads it) or marks the lane idle.
func (s *Syncer) lead(ln *syncLane, r *syncRound) {
	s.mu.Lock()
	for n := 0; n < maxGatherYields; n++ {
		before := len(r.files)
		s.mu.Unlock()
		runtime.Gosched()
		s.mu.Lock()
		if len(r.files) == before {
			break
		}
	}
	ln.next = nil
	s.mu.Unlock()
	errs, all := s.flush(ln, r)
	s.mu.Lock()
	if all && errs[0] != nil {
		ln.failed++
	}
	r.errs, r.all, r.failedAfter = errs, all, ln.failed
	close(r.done)
	if n := ln.next; n != nil {
		n.lead <- struct{}{}
	} else {
		ln.running = false
	}
	s.mu.Unlock()
}

// flush makes every file of r durable: one syncfs for several files or a
// whole round, one fsync for a single file, file by file where the lane
// has no FileSystem. all reports a syncfs.
func (s *Syncer) flush(ln *syncLane, r *syncRound) (errs []error, all bool) {
	s.asked.Add(int64(len(r.files)))
	errs = make([]error, len(r.files))
	if (len(r.files) > 1 || r.whole) && ln.fs != nil {
		err := ln.fs.Sync()
		s.flushes.Add(1)
		for i := range errs {
			errs[i] = err
		}
		return errs, true
	}
	for i, f := range r.files {
		errs[i] = f.Sync()
	}
	s.flushes.Add(int64(len(r.files)))
	return errs, false
}

// Stats reports the flushes done so far and the fsyncs they stood for:
// asked/flushes is the mean number of fsyncs one flush replaced.
func (s *Syncer) Stats() (flushes, asked int64) {
	return s.flushes.Load(), s.asked.Load()
}

// Close closes the lanes' FileSystems. Logs must not sync through the
// Syncer afterwards.
func (s *Syncer) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	for dev, ln := range s.lanes {
		if ln.fs != nil {
			err = errors.Join(err, ln.fs.Close())
		}
		delete(s.lanes, dev)
	}
	return err
}

// syncLane is one filesystem's queue: at most one flush runs, and the
// callers that arrive meanwhile gather in next.
type syncLane struct {
	fs      faultfs.FileSystem // nil: file by file
	failed  uint64             // failed syncfs flushes so far
	running bool
	next    *syncRound
}

// syncRound is the fsyncs one flush stands for.
type syncRound struct {
	files []faultfs.File
	whole bool // a caller needs a syncfs even alone
	// Set before done is closed:
	errs        []error // per file
	all         bool    // the flush was a syncfs
	failedAfter uint64  // the lane's failed count after the flush
	done        chan struct{}
	lead        chan struct{} // the one caller woken to run the flush
}
