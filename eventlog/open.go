package eventlog

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/warren-dev/warren/eventlog/record"
	"github.com/warren-dev/warren/faultfs"
)

// PendingPath returns the pending-file WAL path of a log path:
// "events.jsonl" -> "events.pending".
func PendingPath(path string) string {
	return strings.TrimSuffix(path, ".jsonl") + ".pending"
}

func checkPath(path string) error {
	if !strings.HasSuffix(path, ".jsonl") || filepath.Base(path) == ".jsonl" {
		return fmt.Errorf("eventlog: %q: %w (e.g. agents/<id>/events.jsonl)", path, ErrInvalidPath)
	}
	return nil
}

// Open opens the log at path, creating it and its missing parent
// directories durably. It repairs a torn tail, replays and removes the
// pending file, and returns a *CorruptError (ErrCorrupt) for damage in the
// middle of the log. See the package documentation for the protocol.
func Open(fsys faultfs.FS, path string, opts Options) (_ *Log, err error) {
	if err := checkPath(path); err != nil {
		return nil, err
	}
	l := newLog(fsys, path, opts)
	// Open leads until it returns, so Files cannot close the handle it is
	// opening for another log.
	l.leading = true
	if l.files != nil {
		l.files.acquire(l)
		defer func() {
			if err != nil {
				l.forgetFiles()
			}
		}()
	}

	if opts.Resume != nil {
		// A mismatch must change nothing: check before creating anything.
		if err := checkResume(fsys, path, opts.Resume); err != nil {
			return nil, err
		}
	}
	l.mustSync = map[string]bool{l.dir: true}
	flag := os.O_RDWR | os.O_APPEND
	isNew := false
	if !opts.MustExist {
		if isNew, err = l.createDirs(); err != nil {
			return nil, err
		}
		flag |= os.O_CREATE
	}
	if isNew && opts.Resume != nil {
		return nil, fmt.Errorf("eventlog: resume %s at seq %d: the log is gone: %w", path, opts.Resume.Seq, ErrResumeMismatch)
	}
	f, err := faultfs.OpenNoFollow(fsys, path, flag, 0o600)
	if err != nil {
		return nil, fmt.Errorf("eventlog: open %s: %w", path, err)
	}
	if err := l.recover(f, isNew, opts.Resume); err != nil {
		_ = f.Close()
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("eventlog: stat %s: %w", path, err)
	}
	l.mu.Lock()
	l.f = f
	l.size = fi.Size()
	l.dev = faultfs.Device(fi)
	l.mustSync = nil // only Open's directory syncs use it
	l.nextSeq = l.lastSeq + 1
	if opts.Resume != nil {
		r := *opts.Resume
		l.resumed = &r
	} else {
		l.verified.Store(true)
	}
	l.leading = false
	l.mu.Unlock()
	return l, nil
}

// newLog is the Log Open fills in, with opts' defaults applied.
func newLog(fsys faultfs.FS, path string, opts Options) *Log {
	l := &Log{
		fsys:        fsys,
		path:        path,
		pendingPath: PendingPath(path),
		dir:         filepath.Dir(path),
		logger:      opts.Logger,
		now:         opts.Now,
		onAppend:    opts.OnAppend,
		onHeal:      opts.OnHeal,
		replay:      opts.Replay,
		borrow:      opts.ReplayBorrows,
		readBuf:     opts.ReadBuffer,
		files:       opts.Files,
		syncer:      opts.Syncer,
		healBase:    opts.HealBackoff,
		maxLine:     MaxLineBytes,
		pendingIdle: opts.PendingIdle,
	}
	if l.pendingIdle == 0 {
		l.pendingIdle = DefaultPendingIdle
	}
	if l.healBase == 0 {
		l.healBase = DefaultHealBackoff
	}
	if l.logger == nil {
		l.logger = hclog.NewNullLogger()
	}
	if l.now == nil {
		l.now = time.Now
	}
	l.idle = sync.NewCond(&l.mu)
	return l
}

// createDirs creates the log's missing directories, marking them and
// their parents in l.mustSync, and reports whether the log file is new
// (absent).
func (l *Log) createDirs() (isNew bool, err error) {
	created, err := missingDirs(l.fsys, l.dir)
	if err != nil {
		return false, err
	}
	for _, d := range created {
		l.mustSync[d] = true
		l.mustSync[filepath.Dir(d)] = true
	}
	if err := l.fsys.MkdirAll(l.dir, 0o700); err != nil {
		return false, fmt.Errorf("eventlog: create directory %s: %w", l.dir, err)
	}
	_, statErr := l.fsys.Stat(l.path)
	isNew = errors.Is(statErr, fs.ErrNotExist)
	if statErr != nil && !isNew {
		return false, fmt.Errorf("eventlog: stat %s: %w", l.path, statErr)
	}
	return isNew, nil
}

// recover checks the log, truncates a torn tail, makes a new log's
// directory entries durable and replays the pending file.
func (l *Log) recover(f faultfs.File, isNew bool, resume *Resume) error {
	var sc *record.Scanner
	if resume != nil {
		end, err := resume.check(f, l.path, true)
		if err != nil {
			return err
		}
		// Usually a short tail: a small first buffer.
		sc = record.NewScannerAt(f, l.path, end, int(resume.Seq), resume.Seq, 4<<10)
	} else {
		sc = record.NewScannerIn(f, l.path, MaxLineBytes, l.readBuf)
	}
	l.readBuf = nil // the caller's again once Open returns
	sc.Borrow = l.borrow
	var scanErr error
	for {
		e, err := sc.Next()
		if err == nil {
			if l.replay != nil {
				if rerr := l.replay(e); rerr != nil {
					return fmt.Errorf("eventlog: replaying %s at seq %d: %w", l.path, e.Seq, rerr)
				}
			}
			continue
		}
		if errors.Is(err, io.EOF) {
			break
		}
		var ce *CorruptError
		if !errors.As(err, &ce) {
			return err
		}
		scanErr = err
		break
	}
	l.lastSeq = sc.LastSeq()
	if l.deferSyncs(f, isNew, sc, scanErr) {
		// A new or empty log, nothing to cut or replay: its first group's
		// flush makes the file and its directories durable (doc.go, step
		// 4), before anything is acknowledged.
		l.deferred = l.ancestorDirs()
		return nil
	}
	if sc.Torn().Bytes > 0 || scanErr != nil {
		if err := l.repairTail(f, sc, scanErr); err != nil {
			return err
		}
	}
	// Fsync when the log may hold complete lines that were written but
	// never fsynced: recovery reports them, so they must not vanish in a
	// later power loss (recovering twice must agree). Every group is
	// covered by a durable pending file from before its log write until
	// after its log fsync returned (doc.go, "Open and recovery"), so a log
	// with no pending file, nothing cut and no new file holds only lines
	// some fsync made durable, and ten thousand idle logs cost no device
	// flush each.
	if l.mayHoldUnsynced(isNew, sc, scanErr) {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("eventlog: fsync %s during recovery: %w", l.path, err)
		}
	}
	if isNew || sc.GoodEnd() == 0 {
		// A new (or still empty) log: its directory entry, and those of any
		// directories created for it, now or by an Open that crashed, must
		// be durable before anything is acknowledged.
		if err := l.syncAncestors(); err != nil {
			return fmt.Errorf("eventlog: make %s durable: %w", l.path, err)
		}
	}
	return l.replayPending(f, sc.GoodEnd())
}

// deferSyncs reports whether Open may leave a new (or empty) log's fsyncs
// to its first group: only with a Syncer that flushes whole filesystems
// (one syncfs then covers the log, its directories and the pending file),
// and only when there is nothing to cut and no pending file to replay.
func (l *Log) deferSyncs(f faultfs.File, isNew bool, sc *record.Scanner, scanErr error) bool {
	if l.syncer == nil || !(isNew || sc.GoodEnd() == 0) || sc.Torn().Bytes > 0 || scanErr != nil {
		return false
	}
	fi, err := f.Stat()
	if err != nil || !l.syncer.wholeFlushes(faultfs.Device(fi), l.dir) {
		return false
	}
	_, err = l.fsys.Stat(l.pendingPath)
	return errors.Is(err, fs.ErrNotExist)
}

// mayHoldUnsynced reports whether a recovered log may hold lines no fsync
// made durable: a new or empty log, a cut tail, or a pending file beside it
// (a group whose log fsync may not have returned; an unreadable stat counts
// as one).
func (l *Log) mayHoldUnsynced(isNew bool, sc *record.Scanner, scanErr error) bool {
	if isNew || sc.GoodEnd() == 0 || sc.Torn().Bytes > 0 || scanErr != nil {
		return true
	}
	_, err := l.fsys.Stat(l.pendingPath)
	return !errors.Is(err, fs.ErrNotExist)
}

// missingDirs returns dir and those of its ancestors that do not exist.
func missingDirs(fsys faultfs.FS, dir string) ([]string, error) {
	var missing []string
	for {
		_, err := fsys.Stat(dir)
		if err == nil {
			return missing, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("eventlog: stat directory %s: %w", dir, err)
		}
		missing = append(missing, dir)
		parent := filepath.Dir(dir)
		if parent == dir {
			return missing, nil
		}
		dir = parent
	}
}

// syncAncestors fsyncs the directories whose entries a new (or empty) log
// adds: its own directory (the log file's entry), that directory's parent
// (an Open that crashed may have made the directory and not synced it),
// and the directories this Open created with their parents (l.mustSync).
// Older ancestors are not synced again on every new log: they are the
// caller's to make durable (the daemon syncs its home and the home's
// ancestors once per start, in recovery), and syncing every ancestor up to / cost each
// agent create four or more fsyncs (issue 38).
func (l *Log) syncAncestors() error {
	for _, d := range l.ancestorDirs() {
		if err := l.fsys.SyncDir(d); err != nil {
			return fmt.Errorf("fsync directory %s: %w", d, err)
		}
	}
	return nil
}

// ancestorDirs are the directories syncAncestors syncs, deepest first: a
// directory's entry is made durable before its parent's, as a walk up the
// tree does.
func (l *Log) ancestorDirs() []string {
	// The log's directory and its parent always: an Open that crashed may
	// have created them without making them durable.
	must := map[string]bool{l.dir: true, filepath.Dir(l.dir): true}
	for d := range l.mustSync {
		must[d] = true
	}
	dirs := make([]string, 0, len(must))
	for d := range must {
		dirs = append(dirs, d)
	}
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	return dirs
}
