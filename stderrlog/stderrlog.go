// Package stderrlog keeps what an agent's processes write to stderr
// (docs/DECISIONS.md, "Agent process stderr"), in
// <home>/agents/<id>/stderr.log, for healthy turns too, read back with
// `warren logs --stderr REF`. It is a diagnostic, not state: it goes
// through faultfs like every file of the home, opened without following a
// symbolic link, but it is never synced and nothing is recovered from it.
// When a write would take it past the cap (Logs.Cap) it is renamed to
// stderr.log.1 (replacing the previous one) and a new one is started, so
// an agent keeps at most about twice the cap, the newest output.
//
// Locks: Logs.mu (the table of open logs) and each Log.mu (one file) are
// leaves, never held together: a Log's writes do not wait on another's.
package stderrlog

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

const (
	// Name and Old are the file names in the agent's directory.
	Name = "stderr.log"
	Old  = "stderr.log.1"
	// DefaultCap is the size at which stderr.log is rotated.
	DefaultCap = 1 << 20
)

// Logs hands out one Log per agent, shared by all its processes, so their
// writes interleave whole and rotate once.
type Logs struct {
	fs  faultfs.FS
	dir func(agentID string) string
	// Cap is the size at which a stderr.log is rotated (New: DefaultCap);
	// set it before the first Acquire.
	Cap int64
	// Copy, when set (before the first Acquire), is also given every
	// write, in order, under the log's lock, whether the file took it or
	// not: a warren worker sends its agents' stderr to their daemon so.
	// It must not block, and must not keep p.
	Copy func(agentID string, p []byte)
	log  hclog.Logger

	mu sync.Mutex
	m  map[string]*Log
}

// New returns the stderr logs of the agents whose directories dir gives,
// on fsys; log hears of the first failed write of each run of failures.
func New(fsys faultfs.FS, dir func(agentID string) string, log hclog.Logger) *Logs {
	return &Logs{fs: fsys, dir: dir, Cap: DefaultCap, log: log, m: map[string]*Log{}}
}

// Acquire returns the agent's stderr log with one more user; Release
// drops it (the file is closed when the last user is gone).
func (s *Logs) Acquire(agentID string) *Log {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.m[agentID]
	if l == nil {
		l = &Log{owner: s, agentID: agentID, path: filepath.Join(s.dir(agentID), Name)}
		s.m[agentID] = l
	}
	l.refs++
	return l
}

// Release drops one user of l.
func (s *Logs) Release(l *Log) {
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

// Log is one agent's stderr.log. Its writes never fail: a process's
// stderr must not block or break on a full disk; the first failure is
// logged and the output dropped until a write succeeds again.
type Log struct {
	owner   *Logs
	agentID string
	path    string
	refs    int // under owner.mu

	mu     sync.Mutex
	f      faultfs.File
	size   int64
	closed bool
	failed bool // the last write failed (logged once)
}

var _ io.Writer = (*Log)(nil)

// Write appends p, rotating first when the file would pass the cap. It
// always reports success (see Log).
func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.owner.Copy != nil {
		l.owner.Copy(l.agentID, p)
	}
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

func (l *Log) write(p []byte) error {
	if l.f != nil && l.size > 0 && l.size+int64(len(p)) > l.owner.Cap {
		if err := l.rotate(); err != nil {
			return err
		}
	}
	if l.f == nil {
		if err := l.open(); err != nil {
			return err
		}
		if l.size > 0 && l.size+int64(len(p)) > l.owner.Cap {
			if err := l.rotate(); err != nil {
				return err
			}
		}
	}
	// Only the newest cap bytes of one huge write are worth keeping.
	if over := int64(len(p)) - l.owner.Cap; over > 0 {
		p = p[over:]
	}
	n, err := l.f.Write(p)
	l.size += int64(n)
	return err
}

func (l *Log) open() error {
	f, err := faultfs.OpenNoFollow(l.owner.fs, l.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if errors.Is(err, os.ErrNotExist) {
		// An agent whose log is on a cluster store has no local
		// directory until something of this daemon's own is kept in it
		// (it was taken over from another daemon): the directory is
		// made, never synced (a diagnostic, not state).
		if merr := l.owner.fs.MkdirAll(filepath.Dir(l.path), 0o700); merr != nil {
			return fmt.Errorf("%w (and making its directory: %w)", err, merr)
		}
		f, err = faultfs.OpenNoFollow(l.owner.fs, l.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	}
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
func (l *Log) rotate() error {
	if l.f != nil {
		_ = l.f.Close()
		l.f = nil
	}
	old := filepath.Join(filepath.Dir(l.path), Old)
	if err := l.owner.fs.Rename(l.path, old); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("rotating %s: %w", l.path, err)
	}
	l.size = 0
	return l.open()
}

// close releases the file; later writes (output still draining) reopen it
// for the write only.
func (l *Log) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if l.f != nil {
		_ = l.f.Close()
		l.f = nil
	}
}
