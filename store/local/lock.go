package local

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrLocked is returned by Lock when another process holds the home.
var ErrLocked = errors.New("the home is locked by another warren daemon")

// LockFile and PidFile are the names, inside the home, of the flock file
// and the pid file naming its holder.
const (
	LockFile = "daemon.lock"
	PidFile  = "daemon.pid"
)

// HomeLock is the exclusive flock on <home>/daemon.lock.
type HomeLock struct {
	f    *os.File
	home string
}

// Lock takes the exclusive flock on <home>/daemon.lock, as the daemon
// always has. Right after a daemon was killed the kernel may still hold
// its lock for a moment; when the pid file names a process that is gone,
// the lock is retried for up to two seconds before ErrLocked is returned.
// The lock is a kernel object, not a storage path: it does not go through
// faultfs (a power cut releases it).
func Lock(home string) (*HomeLock, error) {
	path := filepath.Join(home, LockFile)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the lock %s: %w", path, err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return &HomeLock{f: f, home: home}, nil
		}
		pid := readPid(home)
		if pid > 0 && processGone(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond) // the dead holder's lock is being released; no event tells when
			continue
		}
		_ = f.Close()
		held := ""
		if pid > 0 {
			held = fmt.Sprintf(" (pid %d)", pid)
		}
		return nil, fmt.Errorf("%w: %s%s: the lock %s is held; stop it with `warren daemon stop --home %s`",
			ErrLocked, home, held, path, home)
	}
}

// Unlock releases the lock.
func (l *HomeLock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	err := l.f.Close()
	l.f = nil
	return err
}

func readPid(home string) int {
	b, err := os.ReadFile(filepath.Join(home, PidFile))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	return pid
}

func processGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
