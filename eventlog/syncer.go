package eventlog

import (
	"errors"
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
// A failed syncfs fails every fsync it stood for: each of those logs is
// poisoned and reopened (fsyncgate: none of them retries on its handle).
// Where faultfs.FS.SyncFS is unsupported (not Linux, or a kernel before
// 5.8, whose syncfs does not report writeback errors) the Syncer syncs the
// files of a round one by one, each caller getting its own file's result.
//
// Rounds are per filesystem (faultfs.Device of each log, read at Open), so
// a log on another mount is never counted as synced by a flush of the
// home's filesystem.
//
// A Syncer is safe for concurrent use. The zero value is not usable; call
// NewSyncer.
type Syncer struct {
	fsys faultfs.FS
	// fileByFile is set once SyncFS reported errors.ErrUnsupported.
	fileByFile atomic.Bool
	// flushes counts the flushes (SyncFS, or fsyncs of single files) and
	// asked the fsyncs they stood for.
	flushes, asked atomic.Int64

	mu    sync.Mutex
	lanes map[uint64]*syncLane
}

// NewSyncer returns a Syncer for logs on fsys.
func NewSyncer(fsys faultfs.FS) *Syncer {
	return &Syncer{fsys: fsys, lanes: map[uint64]*syncLane{}}
}

// sync makes f's written data durable, with the fsyncs other logs on the
// same filesystem (dev) ask for meanwhile. dir is a directory on that
// filesystem (the log's). With whole the caller needs more than f: the
// directory entries it made too, so the flush is a SyncFS even if no other
// log asks. It returns when a flush that started after the call has
// completed, with that flush's error for f, and reports whether the flush
// was a SyncFS (all: every file and directory is durable); when it was not
// (a lone fsync, or SyncFS unsupported), only f was synced.
func (s *Syncer) sync(dev uint64, dir string, f faultfs.File, whole bool) (all bool, err error) {
	s.mu.Lock()
	ln := s.lanes[dev]
	if ln == nil {
		ln = &syncLane{}
		s.lanes[dev] = ln
	}
	r := ln.next
	if r == nil {
		r = &syncRound{dir: dir, done: make(chan struct{}), lead: make(chan struct{}, 1)}
		ln.next = r
	}
	i := len(r.files)
	r.files = append(r.files, f)
	r.whole = r.whole || whole
	if !ln.running {
		ln.running = true
		s.mu.Unlock()
		s.lead(ln, r)
		return r.all, r.errs[i]
	}
	s.mu.Unlock()
	select {
	case <-r.done:
	case <-r.lead:
		s.lead(ln, r)
	}
	return r.all, r.errs[i]
}

// wholeFlushes reports whether the Syncer flushes whole filesystems (it
// has not found SyncFS unsupported).
func (s *Syncer) wholeFlushes() bool { return !s.fileByFile.Load() }

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
	r.errs, r.all = s.flush(r)
	close(r.done)
	s.mu.Lock()
	if n := ln.next; n != nil {
		n.lead <- struct{}{}
	} else {
		ln.running = false
	}
	s.mu.Unlock()
}

// flush makes every file of r durable: one SyncFS for several files or a
// whole round, one fsync for a single file, file by file where SyncFS is
// unsupported. all reports a SyncFS.
func (s *Syncer) flush(r *syncRound) (errs []error, all bool) {
	s.asked.Add(int64(len(r.files)))
	errs = make([]error, len(r.files))
	if (len(r.files) > 1 || r.whole) && s.wholeFlushes() {
		err := s.fsys.SyncFS(r.dir)
		if !errors.Is(err, errors.ErrUnsupported) {
			s.flushes.Add(1)
			for i := range errs {
				errs[i] = err
			}
			return errs, true
		}
		s.fileByFile.Store(true)
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

// syncLane is one filesystem's queue: at most one flush runs, and the
// callers that arrive meanwhile gather in next.
type syncLane struct {
	running bool
	next    *syncRound
}

// syncRound is the fsyncs one flush stands for.
type syncRound struct {
	dir   string
	files []faultfs.File
	whole bool          // a caller needs a SyncFS even alone
	all   bool          // the flush was a SyncFS; set before done is closed
	errs  []error       // per file, set before done is closed
	done  chan struct{} // closed when the flush returned
	lead  chan struct{} // the one caller woken to run the flush
}
