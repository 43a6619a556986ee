package eventlog

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/warren-dev/warren/eventlog/record"
	"github.com/warren-dev/warren/faultfs"
)

// A handle poisoned by a failed write or fsync heals itself: it is reopened
// when the cause may be gone, never by retrying the failed operation on the
// same file handle. What a heal does, and why it is safe, is in the package
// documentation ("Faults and healing").

// DefaultHealBackoff is the default Options.HealBackoff: the wait after a
// failure before the first reopen attempt. Each failed attempt doubles the
// wait, up to MaxHealBackoff.
const DefaultHealBackoff = 100 * time.Millisecond

// MaxHealBackoff bounds the wait between reopen attempts.
const MaxHealBackoff = 5 * time.Second

// healDue reports whether a poisoned handle may try to reopen now. l.mu
// must be held.
func (l *Log) healDue() bool {
	return l.broken == nil && (l.healBase < 0 || !time.Now().Before(l.healAt))
}

// poisonLocked records a new failure that poisoned the handle and schedules
// the first reopen attempt. l.mu must be held.
func (l *Log) poisonLocked(err error) {
	l.poison = err
	l.poisonedAt = time.Now()
	l.healErr = nil
	if errors.Is(err, ErrChanged) {
		l.broken = err
	}
	l.healWait = l.healBase
	l.healAt = l.poisonedAt.Add(l.healWait)
	l.logger.Error("event log poisoned; appends are refused until it is reopened", "path", l.path, "error", err,
		"retry_in", l.healWait)
	l.armHeal()
}

// settleHeal records the outcome of a reopen attempt. l.mu must be held.
func (l *Log) settleHeal(err error) {
	if err == nil {
		l.logger.Info("event log reopened after a failure; appends accepted again", "path", l.path,
			"last_seq", l.lastSeq, "failed_since", l.poisonedAt, "cause", l.poison)
		l.poison, l.healErr, l.healWait = nil, nil, 0
		return
	}
	l.healErr = err
	if errors.Is(err, ErrChanged) {
		l.broken = err
		l.logger.Error("event log changed on disk while open; it stays closed until the daemon restarts", "path", l.path, "error", err)
		return
	}
	l.healWait = min(2*l.healWait, MaxHealBackoff)
	if l.healWait <= 0 {
		l.healWait = l.healBase
	}
	l.healAt = time.Now().Add(l.healWait)
	l.logger.Warn("reopening a failed event log failed; will retry", "path", l.path, "error", err, "retry_in", l.healWait)
	l.armHeal()
}

// armHeal schedules a reopen attempt at healAt, so that an idle log heals
// (and stops reporting Degraded) without waiting for an append. l.mu must
// be held.
func (l *Log) armHeal() {
	if l.healBase <= 0 || l.closed || l.broken != nil {
		return
	}
	d := time.Until(l.healAt)
	if l.healTimer == nil {
		l.healTimer = time.AfterFunc(d, func() { _ = l.Heal() })
	} else {
		l.healTimer.Reset(d)
	}
}

// Degraded returns why the log refuses appends (nil when it accepts them):
// the failure that poisoned it and, if reopening failed since, why.
func (l *Log) Degraded() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.poison == nil {
		return nil
	}
	return l.poisonedErr()
}

// Heal reopens a poisoned log now, whatever the backoff (see the package
// documentation). It returns nil when the log accepts appends (it was
// healthy or the reopen succeeded), ErrClosed after Close, and otherwise
// why the log still refuses them.
func (l *Log) Heal() error {
	l.mu.Lock()
	for l.leading {
		l.idle.Wait()
	}
	switch {
	case l.closed:
		l.mu.Unlock()
		return fmt.Errorf("eventlog: heal %s: %w", l.path, ErrClosed)
	case l.poison == nil:
		l.mu.Unlock()
		return nil
	case l.broken != nil:
		err := l.poisonedErr()
		l.mu.Unlock()
		return err
	}
	l.leading = true
	l.mu.Unlock()

	err := l.reopen(true)

	l.mu.Lock()
	l.settleHeal(err)
	if err != nil {
		err = l.poisonedErr()
	}
	l.released = 0
	l.handOff()
	l.mu.Unlock()
	if err == nil && l.onHeal != nil {
		l.onHeal()
	}
	return err
}

// reopen opens the log file again for a leader that holds no handles: after
// an idle close (heal false) or a failure (heal true). It never reads the
// whole log: the size must be what the handle knows was acknowledged and
// the last line must be the last acknowledged entry. When healing, bytes
// past that size are the failed write's (never acknowledged) and are cut,
// the cut is fsynced, and the pending file (which can only hold that
// unacknowledged group or one already in the log) is removed durably.
func (l *Log) reopen(heal bool) error {
	if l.files != nil {
		l.files.acquire(l)
	}
	f, err := faultfs.OpenNoFollow(l.fsys, l.path, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		l.forgetFiles()
		return fmt.Errorf("reopen %s: %w", l.path, err)
	}
	if err := l.checkReopened(f, heal); err != nil {
		_ = f.Close()
		l.forgetFiles()
		return err
	}
	l.f = f
	return nil
}

func (l *Log) checkReopened(f interface {
	io.ReaderAt
	Truncate(int64) error
	Sync() error
	Stat() (fs.FileInfo, error)
}, heal bool) error {
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("stat %s after reopening: %w", l.path, err)
	}
	switch size := fi.Size(); {
	case size == l.size:
	case size > l.size && heal && l.logTouched:
		if err := f.Truncate(l.size); err != nil {
			return fmt.Errorf("cut the unacknowledged tail of %s back to %d bytes: %w", l.path, l.size, err)
		}
	default:
		return fmt.Errorf("eventlog: %s is %d bytes, but its acknowledged entries end at byte %d: %w", l.path, size, l.size, ErrChanged)
	}
	if err := record.CheckLast(f, l.size, l.nextSeq-1); err != nil {
		return fmt.Errorf("eventlog: %s: %v: %w", l.path, err, ErrChanged)
	}
	if !heal {
		return nil
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync %s after reopening: %w", l.path, err)
	}
	if err := l.fsys.Remove(l.pendingPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove the pending file %s of the failed write: %w", l.pendingPath, err)
	}
	if err := l.fsys.SyncDir(l.dir); err != nil {
		return fmt.Errorf("fsync directory %s: %w", l.dir, err)
	}
	l.logTouched = false
	return nil
}

// release closes an idle log's handles for Files (see Files). A log that
// is committing, closed or already without handles is left alone.
func (l *Log) release() {
	l.mu.Lock()
	if l.leading || l.closed || l.f == nil {
		l.mu.Unlock()
		return
	}
	l.leading = true
	f, pf := l.f, l.pf
	l.f, l.pf, l.buf = nil, nil, nil
	l.mu.Unlock()
	if pf != nil {
		if err := l.dropPending(pf, true); err != nil {
			l.logger.Warn("removing the pending file of a log closed for the handle cap", "path", l.pendingPath, "error", err)
		}
	}
	if err := f.Close(); err != nil {
		l.logger.Warn("closing a log for the handle cap", "path", l.path, "error", err)
	}
	l.forgetFiles()
	l.mu.Lock()
	l.released = 0
	l.handOff()
	l.mu.Unlock()
}

// dropHandles closes the handles of a leader whose write failed. The
// pending file is kept: the heal removes it after cutting the log back, and
// an Open after a restart may replay it.
func (l *Log) dropHandles() {
	if l.pf != nil {
		_ = l.pf.Close()
		l.pf = nil
	}
	if l.f != nil {
		_ = l.f.Close()
		l.f = nil
	}
	l.buf = nil
	l.forgetFiles()
}

func (l *Log) forgetFiles() {
	if l.files != nil {
		l.files.forget(l)
	}
}

// Abandon drops the handle without touching the disk, as a crash would: no
// append, removal or reopen happens through it afterwards (its timers are
// stopped and its files closed). Tests that simulate a crash use it on
// logs whose filesystem is about to be rebooted.
func (l *Log) Abandon() {
	l.mu.Lock()
	l.closeLocked()
	f, pf := l.f, l.pf
	l.f, l.pf = nil, nil
	l.mu.Unlock()
	if pf != nil {
		_ = pf.Close()
	}
	if f != nil {
		_ = f.Close()
	}
	l.forgetFiles()
}
