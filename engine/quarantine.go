package engine

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/tree"
)

// An agent directory whose log holds no agent.created is either the orphan
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
// durable that recovery cannot rebuild: quarantine.

// QuarantineDir is the directory under the home that holds quarantined
// agent directories.
const QuarantineDir = "quarantine"

// settleUncreated removes or quarantines the directory of a loaded agent
// without agent.created, and counts it. isParent says another agent's
// agent.created names it as parent: it existed, so it is no orphan.
func (c *Core) settleUncreated(l *loaded, isParent bool, rep *RecoveryReport) {
	if l.log != nil {
		_ = l.log.Close()
	}
	why, orphan := c.provablyEmpty(l)
	if orphan && isParent {
		why, orphan = "it holds no agent.created, but another agent's agent.created names it as parent", false
	}
	if orphan {
		rep.Orphans++
		c.log.Warn("removing an orphan agent directory (crash during creation: it holds no acknowledged entry)", "agent", l.id)
		c.removeOrphanDir(l.id)
		return
	}
	if c.clustered() && !l.missing {
		// A cluster store's log is not a local directory: nothing is
		// moved (the store still lists it); the agent is listed corrupt.
		rep.Corrupt++
		c.log.Error("agent log without agent.created in the cluster store; listed as corrupt", "agent", l.id, "why", why)
		a := newAgent(l.id, nil, l.p)
		a.corrupt = fmt.Errorf("its log in the cluster store holds no agent.created (%s); it is not quarantined (see `warren export`)", why)
		a.p.Name = l.id
		l.a = a
		c.putAgent(l.id, a)
		return
	}
	dst, moved, err := c.moveToQuarantine(l.id)
	if moved && err != nil {
		c.log.Error("quarantined an agent directory, but making the move durable failed", "agent", l.id, "to", dst, "err", err)
	}
	if !moved {
		// It stays where it is, listed as corrupt.
		rep.Corrupt++
		c.log.Error("agent directory without agent.created could not be quarantined; listed as corrupt",
			"agent", l.id, "why", why, "err", err)
		a := newAgent(l.id, nil, l.p)
		a.corrupt = fmt.Errorf("%s: %s; moving it to %s failed: %w", c.agentDir(l.id), why,
			filepath.Join(c.opts.Home, QuarantineDir), err)
		a.p.Name = l.id
		l.a = a
		c.putAgent(l.id, a)
		return
	}
	rep.Quarantined++
	c.log.Warn("moved an unreadable agent directory to quarantine; nothing was deleted",
		"agent", l.id, "why", why, "to", dst)
}

// provablyEmpty reports whether an agent directory without agent.created
// holds nothing acknowledged (an orphan), and if not, why.
func (c *Core) provablyEmpty(l *loaded) (string, bool) {
	entries, err := c.fs.ReadDir(c.agentDir(l.id))
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
	case len(others) > 0 && l.missing:
		return fmt.Sprintf("no events.jsonl, but it holds %v", others), false
	case len(others) > 0:
		return fmt.Sprintf("no agent.created in events.jsonl, but it holds %v", others), false
	case !l.missing && l.log.LastSeq() > 0:
		return fmt.Sprintf("events.jsonl holds %d entries but no agent.created", l.log.LastSeq()), false
	}
	return "", true
}

// moveToQuarantine moves an agent directory to <home>/quarantine/<id>-<UTC time>
// durably: the new entry is made durable before the old one's removal, so
// a crash leaves the directory under one name or both, never neither.
func (c *Core) moveToQuarantine(id string) (dst string, moved bool, err error) {
	qdir := filepath.Join(c.opts.Home, QuarantineDir)
	if err := c.fs.MkdirAll(qdir, 0o700); err != nil {
		return "", false, err
	}
	if err := c.fs.SyncDir(c.opts.Home); err != nil {
		return "", false, err
	}
	dst, err = c.unusedName(filepath.Join(qdir, id+"-"+c.stamp()))
	if err != nil {
		return "", false, err
	}
	if err := c.fs.Rename(c.agentDir(id), dst); err != nil {
		return "", false, err
	}
	if err := c.fs.SyncDir(qdir); err != nil {
		return dst, true, err
	}
	return dst, true, c.fs.SyncDir(c.agentsDir)
}

// Quarantined is how many agent directories <home>/quarantine held at the
// last recovery (including those it moved there).
func (c *Core) Quarantined() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.quarantine)
}

// loadQuarantine indexes the agent directories in <home>/quarantine by id.
func (c *Core) loadQuarantine() {
	qdir := filepath.Join(c.opts.Home, QuarantineDir)
	entries, err := c.fs.ReadDir(qdir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		c.log.Warn("cannot list the quarantine directory", "dir", qdir, "err", err)
	}
	q := map[string]string{}
	for _, e := range entries {
		if n := e.Name(); len(n) >= 32 && e.IsDir() {
			if id, ok := tree.NormalizeID(n[:32]); ok && id == n[:32] {
				q[id] = filepath.Join(qdir, n)
			}
		}
	}
	c.mu.Lock()
	c.quarantine = q
	c.mu.Unlock()
}

// quarantinedAs returns where the directory of agent id was quarantined,
// or "".
func (c *Core) quarantinedAs(id string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.quarantine[id]
}

// moveSnapshotAside renames an unreadable session.json (or a link in its
// place) to session.json.corrupt-<UTC time>, durably, so that rebuilding
// the snapshot destroys nothing.
func (c *Core) moveSnapshotAside(id string) (string, error) {
	p := c.snapshotPath(id)
	dst, err := c.unusedName(p + ".corrupt-" + c.stamp())
	if err != nil {
		return "", err
	}
	if err := c.fs.Rename(p, dst); err != nil {
		return "", err
	}
	return dst, c.fs.SyncDir(c.agentDir(id))
}

// stamp is the UTC time in the names of things kept aside.
func (c *Core) stamp() string { return c.now().UTC().Format("20060102T150405.000Z") }

// unusedName returns base, or base-N for the first N that does not exist.
func (c *Core) unusedName(base string) (string, error) {
	name := base
	for i := 1; ; i++ {
		ok, err := faultfs.Exists(c.fs, name)
		if err != nil || !ok {
			return name, err
		}
		name = fmt.Sprintf("%s-%d", base, i)
	}
}
