package engine

import (
	"fmt"
	"path/filepath"

	"github.com/warren-dev/warren/engine/internal/placement"
	"github.com/warren-dev/warren/quarantine"
)

// An agent directory whose log holds no agent.created is either the orphan
// of a crash during creation, which recovery removes, or something recovery
// cannot account for, which it moves to <home>/quarantine and never deletes
// (package quarantine says why that is safe).

// settleUncreated removes or quarantines the directory of a loaded agent
// without agent.created, and counts it. isParent says another agent's
// agent.created names it as parent: it existed, so it is no orphan.
func (c *Core) settleUncreated(l *loaded, isParent bool, rep *RecoveryReport) {
	if l.log != nil {
		_ = l.log.Close()
	}
	why, empty := quarantine.ProvablyEmpty(c.fs, c.agentDir(l.id), l.missing, l.log)
	settle, why := placement.Settle(why, empty, isParent, c.clustered(), l.missing)
	switch settle {
	case placement.RemoveOrphan:
		rep.Orphans++
		c.log.Warn("removing an orphan agent directory (crash during creation: it holds no acknowledged entry)", "agent", l.id)
		c.removeOrphanDir(l.id)
		return
	case placement.ListCorrupt:
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
	dst, moved, err := quarantine.Move(c.fs, c.opts.Home, c.agentDir(l.id), c.now())
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
			filepath.Join(c.opts.Home, quarantine.Dir), err)
		a.p.Name = l.id
		l.a = a
		c.putAgent(l.id, a)
		return
	}
	rep.Quarantined++
	c.log.Warn("moved an unreadable agent directory to quarantine; nothing was deleted",
		"agent", l.id, "why", why, "to", dst)
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
	q, err := quarantine.Index(c.fs, c.opts.Home)
	if err != nil {
		c.log.Warn("cannot list the quarantine directory", "dir", filepath.Join(c.opts.Home, quarantine.Dir), "err", err)
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
