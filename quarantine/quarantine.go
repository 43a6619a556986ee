// Package quarantine keeps aside what recovery cannot account for, and
// never deletes it. An agent directory whose log holds no agent.created is
// either the orphan
// of a crash during creation, which recovery removes, or something recovery
// cannot account for, which it moves to <home>/quarantine and never deletes.
//
// CreateAgent writes, in order: the directory and an empty events.jsonl
// (both made durable by eventlog.Open), then agent.created and
// session.created in one AppendBatch (pending file, its directory entry,
// the log write and fsync), and only then session.json. A crash before the
// batch was durable leaves at most the directory, an empty events.jsonl
// and an incomplete events.pending, which Open discards (a pending file
// without a valid commit trailer never reached the log). A complete
// pending file is replayed by Open, so the agent then has its
// agent.created. Any other content (session.json or its temp files, a
// non-empty log without agent.created, a missing log beside other files,
// copies kept by recovery or repair, anything unknown) means something was
// durable that recovery cannot rebuild: quarantine (Move). ProvablyEmpty
// tells the two apart; an unreadable session.json is moved aside
// (MoveAside) before it is rebuilt.
package quarantine

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/tree"
)

// Dir is the directory under the home that holds quarantined agent
// directories.
const Dir = "quarantine"

// ProvablyEmpty reports whether an agent directory without agent.created
// holds nothing acknowledged (an orphan: recovery may remove it), and if
// not, why. missing says it has no events.jsonl; log is its log when it
// has one.
func ProvablyEmpty(fsys faultfs.FS, dir string, missing bool, log interface{ LastSeq() uint64 }) (string, bool) {
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return fmt.Sprintf("cannot list it: %v", err), false
	}
	var others []string
	for _, e := range entries {
		if e.Name() == "events.jsonl" && e.Type().IsRegular() {
			continue
		}
		others = append(others, e.Name())
	}
	switch {
	case len(others) > 0 && missing:
		return fmt.Sprintf("no events.jsonl, but it holds %v", others), false
	case len(others) > 0:
		return fmt.Sprintf("no agent.created in events.jsonl, but it holds %v", others), false
	case !missing && log.LastSeq() > 0:
		return fmt.Sprintf("events.jsonl holds %d entries but no agent.created", log.LastSeq()), false
	}
	return "", true
}

// Move moves the agent directory dir to <home>/quarantine/<id>-<UTC time>
// durably: the new entry is made durable before the old one's removal, so
// a crash leaves the directory under one name or both, never neither.
// moved says whether the rename happened (err may still say that making
// it durable failed).
func Move(fsys faultfs.FS, home, dir string, now time.Time) (dst string, moved bool, err error) {
	qdir := filepath.Join(home, Dir)
	if err := fsys.MkdirAll(qdir, 0o700); err != nil {
		return "", false, err
	}
	if err := fsys.SyncDir(home); err != nil {
		return "", false, err
	}
	dst, err = UnusedName(fsys, filepath.Join(qdir, filepath.Base(dir)+"-"+Stamp(now)))
	if err != nil {
		return "", false, err
	}
	if err := fsys.Rename(dir, dst); err != nil {
		return "", false, err
	}
	if err := fsys.SyncDir(qdir); err != nil {
		return dst, true, err
	}
	return dst, true, fsys.SyncDir(filepath.Dir(dir))
}

// Index maps the id of each agent directory in <home>/quarantine to its
// path (a missing directory is an empty index).
func Index(fsys faultfs.FS, home string) (map[string]string, error) {
	qdir := filepath.Join(home, Dir)
	entries, err := fsys.ReadDir(qdir)
	if errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	q := map[string]string{}
	for _, e := range entries {
		if n := e.Name(); len(n) >= 32 && e.IsDir() {
			if id, ok := tree.NormalizeID(n[:32]); ok && id == n[:32] {
				q[id] = filepath.Join(qdir, n)
			}
		}
	}
	return q, err
}

// MoveAside renames an unreadable file (or a link in its place) to
// <name>.corrupt-<UTC time>, durably, so that rebuilding it destroys
// nothing (recovery does this to session.json).
func MoveAside(fsys faultfs.FS, p string, now time.Time) (string, error) {
	dst, err := UnusedName(fsys, p+".corrupt-"+Stamp(now))
	if err != nil {
		return "", err
	}
	if err := fsys.Rename(p, dst); err != nil {
		return "", err
	}
	return dst, fsys.SyncDir(filepath.Dir(p))
}

// Stamp is the UTC time in the names of things kept aside.
func Stamp(now time.Time) string { return now.UTC().Format("20060102T150405.000Z") }

// UnusedName returns base, or base-N for the first N that does not exist.
func UnusedName(fsys faultfs.FS, base string) (string, error) {
	name := base
	for i := 1; ; i++ {
		ok, err := faultfs.Exists(fsys, name)
		if err != nil || !ok {
			return name, err
		}
		name = fmt.Sprintf("%s-%d", base, i)
	}
}
