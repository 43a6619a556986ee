package eventlog

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/warren-dev/warren/faultfs"
)

// The pending file is created by the first group after the log was idle and
// then rewritten in place at offset 0 by each later group: an in-place
// overwrite and fsync costs one device flush, where creating a file costs a
// journal commit of its inode and directory entry as well (on ext4 about
// 2.5 times as long). retirePending removes it after PendingIdle without a
// group, and Close removes it, so it is absent while the log is at rest.

// writePending writes buf (the group's lines and trailer) at the start of
// the pending file, creating the file if it is absent, and fsyncs it. Once
// per creation the file's directory entry is made durable too, before the
// log write: a power loss that tears the log write must find the pending
// file, since only a region the pending file covers may be cut as a torn
// tail (and a multi-record batch must be all or none). Called by the
// leader only.
func (l *Log) writePending(buf []byte) error {
	if l.pf == nil {
		pf, err := faultfs.OpenNoFollow(l.fsys, l.pendingPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return fmt.Errorf("create %s: %w", l.pendingPath, err)
		}
		l.pf, l.pfDurable = pf, false
	}
	mark := l.syncMark()
	n, err := l.pf.WriteAt(buf, 0)
	if err == nil && n != len(buf) {
		err = fmt.Errorf("wrote %d of %d bytes: %w", n, len(buf), io.ErrShortWrite)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", l.pendingPath, err)
	}
	whole := !l.pfDurable || l.deferred != nil
	all, err := l.syncFile(l.pf, mark, whole)
	if err != nil {
		return fmt.Errorf("fsync %s: %w", l.pendingPath, err)
	}
	if whole && !all {
		if err := l.syncEntries(); err != nil {
			return err
		}
	}
	l.pfDurable, l.deferred = true, nil
	return nil
}

// syncEntries is what a syncfs would have done for the first group after
// the pending file's creation, one fsync at a time: the log file and the
// directories its Open deferred (a new log's), then the pending file's
// directory entry.
func (l *Log) syncEntries() error {
	if l.deferred != nil {
		if err := l.f.Sync(); err != nil {
			return fmt.Errorf("fsync %s: %w", l.path, err)
		}
		for _, d := range l.deferred {
			if err := l.fsys.SyncDir(d); err != nil {
				return fmt.Errorf("fsync directory %s: %w", d, err)
			}
		}
	}
	if !l.pfDurable {
		if err := l.fsys.SyncDir(l.dir); err != nil {
			return fmt.Errorf("fsync directory %s: %w", l.dir, err)
		}
	}
	return nil
}

// armRetire starts the idle timer for the pending file if it is open and
// the timer is not already running. l.mu must be held.
func (l *Log) armRetire() {
	if l.pf == nil || l.retireArmed || l.pendingIdle < 0 {
		return
	}
	l.retireArmed = true
	if l.retire == nil {
		l.retire = time.AfterFunc(l.pendingIdle, l.retirePending)
	} else {
		l.retire.Reset(l.pendingIdle)
	}
}

// retirePending runs on the idle timer. If no group committed for
// PendingIdle it takes the leader's role, so no group runs meanwhile, and
// closes and removes the pending file; otherwise it waits out the rest of
// the idle time.
func (l *Log) retirePending() {
	l.mu.Lock()
	if l.closed || l.pf == nil {
		l.retireArmed = false
		l.mu.Unlock()
		return
	}
	if wait := l.pendingIdle - time.Since(l.lastGroup); l.leading || wait > 0 {
		if wait <= 0 {
			wait = l.pendingIdle
		}
		l.retire.Reset(wait)
		l.mu.Unlock()
		return
	}
	l.retireArmed = false
	l.leading = true
	pf, poisoned := l.pf, l.poison != nil
	l.pf = nil
	l.mu.Unlock()

	if err := l.dropPending(pf, !poisoned); err != nil {
		// Harmless: every group in the file is in the log, and the next
		// group truncates it.
		l.logger.Warn("removing the idle pending file failed", "path", l.pendingPath, "error", err)
	}

	l.mu.Lock()
	l.released = 0
	l.handOff()
	hook := l.retired
	l.mu.Unlock()
	if hook != nil {
		hook()
	}
}

// dropPending closes the pending file and, if remove is set and the close
// succeeded, removes it without a directory fsync: every group it held is
// durable in the log, so a removal a crash undoes only brings back seqs
// that replay skips. A failed close (in the crash tests, a handle from
// before a simulated crash) leaves the path alone: it may name a newer
// file by now.
func (l *Log) dropPending(pf faultfs.File, remove bool) error {
	if err := pf.Close(); err != nil {
		return fmt.Errorf("eventlog: close pending file %s: %w", l.pendingPath, err)
	}
	if !remove {
		return nil
	}
	if err := l.fsys.Remove(l.pendingPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("eventlog: remove pending file %s: %w", l.pendingPath, err)
	}
	return nil
}
