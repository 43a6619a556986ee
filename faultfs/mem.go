package faultfs

import (
	"io/fs"
	"sync"
	"time"
)

// Mem is a crashable in-memory filesystem with fault injection. It is safe
// for concurrent use. See the package documentation for the durability model.
type Mem struct {
	mu       sync.Mutex
	root     *node
	gen      uint64 // incremented by Reboot; Files of older generations are dead
	crashed  bool
	ops      int // mutating ops since NewMem
	crashAt  int // absolute op number that crashes; 0 = none
	trace    []Op
	rules    []*ruleState
	inflight *inflightWrite // the write torn by the last crash, if any
	// wbFailures counts failed writebacks (failed File.Sync and
	// FileSystem.Sync calls): a FileSystem reports each once.
	wbFailures int
}

// inflightWrite records a write that a crash interrupted, so that Reboot can
// decide how much of it reached the file.
type inflightWrite struct {
	n    *node
	off  int64
	data []byte
}

var _ FS = (*Mem)(nil)

// memEpoch is the modification time base: Mem's clock is logical (one second
// per mutating op) so that runs are deterministic.
var memEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// NewMem returns an empty Mem holding only its root directory.
//
// Mem is test infrastructure, kept for the crash and fault tests of every
// storage package and of the daemon: the daemon itself runs on OS, so
// `deadcode ./cmd/warren` lists Mem and its methods.
func NewMem() *Mem {
	return &Mem{root: newDir(0o755, memEpoch)}
}

func (m *Mem) now() time.Time { return memEpoch.Add(time.Duration(m.ops) * time.Second) }

// MutatingOps returns the number of mutating operations attempted since
// NewMem, including ones that failed. It equals len(m.Ops()).
func (m *Mem) MutatingOps() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ops
}

// Ops returns a copy of the trace of mutating operations since NewMem, in the
// order they were attempted (failed ones included).
func (m *Mem) Ops() []Op {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Op(nil), m.trace...)
}

// CrashAt arms a crash at the k-th mutating operation from now (1 = the
// next). That operation does not take effect (a write in flight may be torn,
// see RebootOptions) and returns an error wrapping ErrCrashed; so does every
// later operation until Reboot. k <= 0 disarms a pending crash.
func (m *Mem) CrashAt(k int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if k <= 0 {
		m.crashAt = 0
		return
	}
	m.crashAt = m.ops + k
}

// Crash crashes the filesystem now.
func (m *Mem) Crash() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.crashed = true
	m.crashAt = 0
}

// Crashed reports whether the filesystem is crashed (and not yet rebooted).
func (m *Mem) Crashed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.crashed
}

// Inject adds a fault rule. Rules outlive Reboot; ClearRules removes them.
func (m *Mem) Inject(r Rule) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rules = append(m.rules, &ruleState{Rule: r})
}

// ClearRules removes every injected rule.
func (m *Mem) ClearRules() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rules = nil
}

// begin starts a mutating operation: it fails if the filesystem is crashed,
// counts and traces the op, fires an armed crash, and applies the rules. A
// non-nil rule means the op must fail with rule.err() (and take the rule's
// partial effect); a non-nil error means it must fail with no effect.
// m.mu must be held.
func (m *Mem) begin(o Op) (*ruleState, error) {
	if m.crashed {
		return nil, pathErr(o.Kind, o.Path, ErrCrashed)
	}
	m.ops++
	m.trace = append(m.trace, o)
	if m.crashAt != 0 && m.ops >= m.crashAt {
		m.crashed = true
		m.crashAt = 0
		return nil, pathErr(o.Kind, o.Path, ErrCrashed)
	}
	r := m.fire(o)
	if r != nil && r.Crash {
		m.crashed = true
		m.crashAt = 0
		return nil, pathErr(o.Kind, o.Path, ErrCrashed)
	}
	return r, nil
}

// beginRead starts a non-mutating operation. m.mu must be held.
func (m *Mem) beginRead(o Op) error {
	if m.crashed {
		return pathErr(o.Kind, o.Path, ErrCrashed)
	}
	if r := m.fire(o); r != nil {
		if r.Crash {
			m.crashed = true
			m.crashAt = 0
			return pathErr(o.Kind, o.Path, ErrCrashed)
		}
		return pathErr(o.Kind, o.Path, r.err())
	}
	return nil
}

// fire lets every rule observe o and returns the first one that fires.
func (m *Mem) fire(o Op) *ruleState {
	var hit *ruleState
	for _, r := range m.rules {
		if r.observe(o) && hit == nil {
			hit = r
		}
	}
	return hit
}

// baseName is the last element of name ("/" for the root), as Stat reports it.
func baseName(name string) string {
	parts := components(name)
	if len(parts) == 0 {
		return "/"
	}
	return parts[len(parts)-1]
}

var _ fs.FileInfo = memInfo{}
