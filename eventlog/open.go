package eventlog

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
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
func Open(fsys faultfs.FS, path string, opts Options) (*Log, error) {
	if err := checkPath(path); err != nil {
		return nil, err
	}
	l := &Log{
		fsys:        fsys,
		path:        path,
		pendingPath: PendingPath(path),
		dir:         filepath.Dir(path),
		logger:      opts.Logger,
		now:         opts.Now,
		onAppend:    opts.OnAppend,
		maxLine:     MaxLineBytes,
	}
	if l.logger == nil {
		l.logger = hclog.NewNullLogger()
	}
	if l.now == nil {
		l.now = time.Now
	}
	l.idle = sync.NewCond(&l.mu)

	if err := fsys.MkdirAll(l.dir, 0o700); err != nil {
		return nil, fmt.Errorf("eventlog: create directory %s: %w", l.dir, err)
	}
	_, statErr := fsys.Stat(path)
	isNew := errors.Is(statErr, fs.ErrNotExist)
	if statErr != nil && !isNew {
		return nil, fmt.Errorf("eventlog: stat %s: %w", path, statErr)
	}
	f, err := fsys.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("eventlog: open %s: %w", path, err)
	}
	if err := l.recover(f, isNew); err != nil {
		_ = f.Close()
		return nil, err
	}
	l.f = f
	l.nextSeq = l.lastSeq + 1
	return l, nil
}

// recover checks the log, truncates a torn tail, makes a new log's
// directory entries durable and replays the pending file.
func (l *Log) recover(f faultfs.File, isNew bool) error {
	sc := newLogScanner(f, l.path, MaxLineBytes)
	if err := sc.scanToEnd(); err != nil {
		return err
	}
	l.lastSeq = sc.lastSeq
	if sc.tornBytes > 0 {
		l.logger.Warn("truncating torn tail of event log", "path", l.path,
			"offset", sc.goodEnd, "bytes", sc.tornBytes, "reason", sc.tornReason, "last_seq", sc.lastSeq)
		if err := f.Truncate(sc.goodEnd); err != nil {
			return fmt.Errorf("eventlog: truncate torn tail of %s to %d bytes: %w", l.path, sc.goodEnd, err)
		}
	}
	// Always fsync: after a process crash the log may hold complete lines
	// that were written but never fsynced. Recovery reports them, so they
	// must not vanish in a later power loss (recovering twice must agree).
	if err := f.Sync(); err != nil {
		return fmt.Errorf("eventlog: fsync %s during recovery: %w", l.path, err)
	}
	if isNew || sc.goodEnd == 0 {
		// A new (or still empty) log: its directory entry, and those of any
		// directories created for it, now or by an Open that crashed, must
		// be durable before anything is acknowledged.
		if err := syncAncestors(l.fsys, l.dir); err != nil {
			return fmt.Errorf("eventlog: make %s durable: %w", l.path, err)
		}
	}
	return l.replayPending(f)
}

// syncAncestors fsyncs dir and each of its ancestors up to the root.
func syncAncestors(fsys faultfs.FS, dir string) error {
	for {
		if err := fsys.SyncDir(dir); err != nil {
			return fmt.Errorf("fsync directory %s: %w", dir, err)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return nil
		}
		dir = parent
	}
}

// replayPending appends the pending file's valid records that the log lacks,
// fsyncs the log, then removes the pending file and fsyncs the directory.
// Running it again after a crash at any point gives the same log.
func (l *Log) replayPending(f faultfs.File) error {
	pf, err := l.fsys.OpenFile(l.pendingPath, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("eventlog: open pending file %s: %w", l.pendingPath, err)
	}
	add, skipped, dropped, err := readPending(pf, l.pendingPath, l.lastSeq)
	_ = pf.Close()
	if err != nil {
		return err
	}
	l.logger.Info("replaying pending file", "path", l.pendingPath,
		"append", len(add.seqs), "already_in_log", skipped, "invalid_tail_bytes", dropped)
	if len(add.buf) > 0 {
		n, err := f.Write(add.buf)
		if err == nil && n != len(add.buf) {
			err = fmt.Errorf("wrote %d of %d bytes: %w", n, len(add.buf), io.ErrShortWrite)
		}
		if err != nil {
			return fmt.Errorf("eventlog: replay %s into %s: %w", l.pendingPath, l.path, err)
		}
		if err := f.Sync(); err != nil {
			return fmt.Errorf("eventlog: fsync %s after replaying %s: %w", l.path, l.pendingPath, err)
		}
		l.lastSeq = add.seqs[len(add.seqs)-1]
	}
	if err := l.fsys.Remove(l.pendingPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("eventlog: remove replayed pending file %s: %w", l.pendingPath, err)
	}
	if err := l.fsys.SyncDir(l.dir); err != nil {
		return fmt.Errorf("eventlog: fsync directory %s after removing %s: %w", l.dir, l.pendingPath, err)
	}
	return nil
}

type pendingAdd struct {
	buf  []byte
	seqs []uint64
}

// readPending returns the pending file's valid lines with seqs after
// lastSeq (which must continue it without a gap), how many valid lines were
// already in the log, and how many bytes after the valid prefix were ignored
// (a pending write torn by a crash; it was never acknowledged).
func readPending(r io.ReaderAt, path string, lastSeq uint64) (add pendingAdd, skipped int, dropped int64, err error) {
	ls := newLineScanner(r, 0, MaxLineBytes)
	line := 0
	for {
		kind, b, off, n, rerr := ls.next()
		if rerr != nil {
			return add, skipped, dropped, fmt.Errorf("eventlog: read pending file %s: %w", path, rerr)
		}
		if kind == kindEOF {
			return add, skipped, dropped, nil
		}
		if kind == kindPartial || kind == kindTooLong {
			return add, skipped, dropped + n + restLen(ls), nil
		}
		line++
		e, perr := parseLine(b)
		if perr != nil {
			return add, skipped, dropped + n + restLen(ls), nil
		}
		switch {
		case e.Seq <= lastSeq:
			skipped++
		case e.Seq == lastSeq+1:
			add.buf = append(add.buf, b...)
			add.buf = append(add.buf, '\n')
			add.seqs = append(add.seqs, e.Seq)
			lastSeq = e.Seq
		default:
			return add, skipped, dropped, &CorruptError{Path: path, Line: line, Seq: lastSeq + 1, Offset: off,
				Reason: fmt.Sprintf("pending record has seq %d but the log ends at seq %d (a gap); the log was cut back or the pending file belongs elsewhere", e.Seq, lastSeq)}
		}
	}
}

// restLen counts the bytes left after the scanner's position.
func restLen(ls *lineScanner) int64 {
	var total int64
	for {
		kind, _, _, n, err := ls.next()
		if err != nil || kind == kindEOF {
			return total
		}
		total += n
		if kind == kindPartial {
			return total
		}
	}
}
