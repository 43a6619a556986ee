package faultfs

import (
	"errors"
	"io/fs"
	"strings"
	"syscall"
)

// ErrCrashed is returned (wrapped) by every operation on a crashed Mem and on
// any File opened before the crash, until Mem.Reboot.
var ErrCrashed = errors.New("faultfs: simulated crash: the filesystem is down until Reboot")

// ErrInjected marks every error produced by a Rule given to Mem.Inject.
// errors.Is(err, ErrInjected) and errors.Is(err, rule.Err) both hold.
var ErrInjected = errors.New("faultfs: injected fault")

// OpKind names a kind of filesystem operation, for the trace (Mem.Ops), for
// crash points (Mem.CrashAt) and for fault injection (Rule.Kind).
type OpKind int

// Mutating operations: each call counts once in Mem.MutatingOps and appears
// in Mem.Ops. Read operations (OpOpen, OpRead, OpReadDir, OpStat) are not
// counted or traced; they can only be named in a Rule.
const (
	// OpAny matches every mutating kind in a Rule (never read kinds).
	OpAny OpKind = iota
	// OpCreate is OpenFile with O_CREATE or O_TRUNC.
	OpCreate
	// OpWrite is File.Write.
	OpWrite
	// OpSync is File.Sync on a regular file.
	OpSync
	// OpRename is FS.Rename.
	OpRename
	// OpRemove is FS.Remove.
	OpRemove
	// OpTruncate is FS.Truncate or File.Truncate.
	OpTruncate
	// OpMkdir is one FS.MkdirAll call (however many directories it creates).
	OpMkdir
	// OpSyncDir is FS.SyncDir, or File.Sync on a file opened on a directory.
	OpSyncDir
	// OpSyncFS is FileSystem.Sync (FS.OpenFS): a whole-filesystem flush.
	OpSyncFS

	// OpOpen is OpenFile without O_CREATE or O_TRUNC (not mutating).
	OpOpen
	// OpRead is File.Read or File.ReadAt (not mutating).
	OpRead
	// OpReadDir is FS.ReadDir (not mutating).
	OpReadDir
	// OpStat is FS.Stat or File.Stat (not mutating).
	OpStat
)

var opNames = [...]string{
	OpAny: "any", OpCreate: "create", OpWrite: "write", OpSync: "sync",
	OpRename: "rename", OpRemove: "remove", OpTruncate: "truncate",
	OpMkdir: "mkdir", OpSyncDir: "syncdir", OpSyncFS: "syncfs", OpOpen: "open", OpRead: "read",
	OpReadDir: "readdir", OpStat: "stat",
}

// String returns the lower-case name of the kind ("write", "syncdir", ...).
func (k OpKind) String() string {
	if k < 0 || int(k) >= len(opNames) {
		return "unknown"
	}
	return opNames[k]
}

// Mutating reports whether operations of this kind change the filesystem
// (and so count in Mem.MutatingOps).
func (k OpKind) Mutating() bool { return k >= OpCreate && k <= OpSyncFS }

// Op is one entry of the mutating-operation trace. Path is the path the
// caller passed (cleaned with path.Clean); for a File operation it is the
// name the file was opened with. To is the new path of a rename, else "".
type Op struct {
	Kind OpKind
	Path string
	To   string
}

// String renders the op as "kind path" or "rename old -> new".
func (o Op) String() string {
	if o.To != "" {
		return o.Kind.String() + " " + o.Path + " -> " + o.To
	}
	return o.Kind.String() + " " + o.Path
}

// Rule injects a fault into matching operations of a Mem.
//
// An operation matches when its kind equals Kind (OpAny matches every
// mutating kind) and, if Path is not empty, its path (or a rename's new
// path) ends with Path. The match is on the string: "events.jsonl" also
// matches "old_events.jsonl"; write "/events.jsonl" to anchor on a name. Counting starts when the rule is injected. The Nth
// matching operation (1-based; 0 means 1) fails; with Sticky, every matching
// operation from the Nth on fails.
//
// A failing operation returns an error wrapping both Err and ErrInjected and
// has no effect, except:
//   - a write with ShortWrite writes the first half of its buffer and returns
//     n < len(p) with the error;
//   - a failing sync follows fsyncgate: the file's unsynced data is dropped
//     (its content reverts to what was last synced) and later syncs succeed.
//
// Err defaults to syscall.ENOSPC for a short write, else syscall.EIO.
//
// With Crash, the matching operation crashes the filesystem instead, exactly
// as Mem.CrashAt would at that operation (a read kind crashes too) (Err and ShortWrite are then
// ignored): for example, crash at the second fsync of "/events.jsonl".
type Rule struct {
	Kind       OpKind
	Path       string
	Nth        int
	Err        error
	ShortWrite bool
	Sticky     bool
	Crash      bool
}

type ruleState struct {
	Rule
	seen  int
	spent bool
}

func (r *ruleState) matches(o Op) bool {
	if r.Kind == OpAny {
		if !o.Kind.Mutating() {
			return false
		}
	} else if r.Kind != o.Kind {
		return false
	}
	if r.Path == "" {
		return true
	}
	return strings.HasSuffix(o.Path, r.Path) || (o.To != "" && strings.HasSuffix(o.To, r.Path))
}

// observe counts o if it matches and reports whether the rule fires on it.
func (r *ruleState) observe(o Op) bool {
	if r.spent || !r.matches(o) {
		return false
	}
	r.seen++
	nth := max(r.Nth, 1)
	switch {
	case r.seen == nth && !r.Sticky:
		r.spent = true
		return true
	case r.seen >= nth && r.Sticky:
		return true
	}
	return false
}

func (r *ruleState) err() error {
	e := r.Err
	if e == nil {
		if r.ShortWrite {
			e = syscall.ENOSPC
		} else {
			e = syscall.EIO
		}
	}
	return &injectedError{err: e}
}

// injectedError wraps the rule's error and ErrInjected.
type injectedError struct{ err error }

func (e *injectedError) Error() string   { return "injected fault: " + e.err.Error() }
func (e *injectedError) Unwrap() []error { return []error{e.err, ErrInjected} }

func pathErr(op OpKind, p string, err error) error {
	return &fs.PathError{Op: op.String(), Path: p, Err: err}
}
