package engine

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/faultfs"
)

// Agent process stderr (docs/DECISIONS.md, "Agent process stderr"). What
// an agent's processes write to stderr is kept in
// <home>/agents/<id>/stderr.log, for healthy turns too, read back with
// `warren logs --stderr REF`. It is a diagnostic, not state: it goes
// through faultfs like every file of the home, opened without following a
// symbolic link, but it is never synced and nothing is recovered from it.
// When a write would take it past stderrLogCap it is renamed to
// stderr.log.1 (replacing the previous one) and a new one is started, so
// an agent keeps at most about twice the cap, the newest output.

const (
	// StderrLogName and StderrLogOld are the file names in the agent's
	// directory.
	StderrLogName = "stderr.log"
	StderrLogOld  = "stderr.log.1"
	// stderrLogCap is the size at which stderr.log is rotated.
	stderrLogCap = 1 << 20
)

// stderrLogs hands out one stderrLog per agent, shared by all its
// processes, so their writes interleave whole and rotate once.
type stderrLogs struct {
	fs  faultfs.FS
	dir func(agentID string) string
	cap int64
	log hclog.Logger

	mu sync.Mutex
	m  map[string]*stderrLog
}

func newStderrLogs(fsys faultfs.FS, dir func(string) string, log hclog.Logger) *stderrLogs {
	return &stderrLogs{fs: fsys, dir: dir, cap: stderrLogCap, log: log, m: map[string]*stderrLog{}}
}

// acquire returns the agent's stderr log with one more user; release
// drops it (the file is closed when the last user is gone).
func (s *stderrLogs) acquire(agentID string) *stderrLog {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.m[agentID]
	if l == nil {
		l = &stderrLog{owner: s, agentID: agentID, path: filepath.Join(s.dir(agentID), StderrLogName)}
		s.m[agentID] = l
	}
	l.refs++
	return l
}

func (s *stderrLogs) release(l *stderrLog) {
	s.mu.Lock()
	l.refs--
	last := l.refs == 0
	if last {
		delete(s.m, l.agentID)
	}
	s.mu.Unlock()
	if last {
		l.close()
	}
}

// stderrLog is one agent's stderr.log. Its writes never fail: a process's
// stderr must not block or break on a full disk; the first failure is
// logged and the output dropped until a write succeeds again.
type stderrLog struct {
	owner   *stderrLogs
	agentID string
	path    string
	refs    int // under owner.mu

	mu     sync.Mutex
	f      faultfs.File
	size   int64
	closed bool
	failed bool // the last write failed (logged once)
}

var _ io.Writer = (*stderrLog)(nil)

// Write appends p, rotating first when the file would pass the cap. It
// always reports success (see stderrLog).
func (l *stderrLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.write(p); err != nil {
		if !l.failed {
			l.owner.log.Warn("cannot keep an agent process's stderr; dropping it until writes succeed",
				"agent", l.agentID, "file", l.path, "err", err)
		}
		l.failed = true
	} else {
		l.failed = false
	}
	if l.closed && l.f != nil {
		// Output drained after the last process ended: do not hold the file.
		_ = l.f.Close()
		l.f = nil
	}
	return len(p), nil
}

func (l *stderrLog) write(p []byte) error {
	if l.f != nil && l.size > 0 && l.size+int64(len(p)) > l.owner.cap {
		if err := l.rotate(); err != nil {
			return err
		}
	}
	if l.f == nil {
		if err := l.open(); err != nil {
			return err
		}
		if l.size > 0 && l.size+int64(len(p)) > l.owner.cap {
			if err := l.rotate(); err != nil {
				return err
			}
		}
	}
	// Only the newest cap bytes of one huge write are worth keeping.
	if over := int64(len(p)) - l.owner.cap; over > 0 {
		p = p[over:]
	}
	n, err := l.f.Write(p)
	l.size += int64(n)
	return err
}

func (l *stderrLog) open() error {
	f, err := faultfs.OpenNoFollow(l.owner.fs, l.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return err
	}
	if !st.Mode().IsRegular() {
		_ = f.Close()
		return fmt.Errorf("%s is not a regular file", l.path)
	}
	l.f, l.size = f, st.Size()
	return nil
}

// rotate moves stderr.log to stderr.log.1 and starts a new stderr.log.
func (l *stderrLog) rotate() error {
	if l.f != nil {
		_ = l.f.Close()
		l.f = nil
	}
	old := filepath.Join(filepath.Dir(l.path), StderrLogOld)
	if err := l.owner.fs.Rename(l.path, old); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("rotating %s: %w", l.path, err)
	}
	l.size = 0
	return l.open()
}

// close releases the file; later writes (output still draining) reopen it
// for the write only.
func (l *stderrLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if l.f != nil {
		_ = l.f.Close()
		l.f = nil
	}
}
