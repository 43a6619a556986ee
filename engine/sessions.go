package engine

import (
	"github.com/warren-dev/warren/schedule"
	"github.com/warren-dev/warren/session"
)

// An agent's live provider session is package live's (c.sessions); its
// session.json snapshot is written behind the log by package snapsave
// (c.snaps).

// saveSession updates the agent's session.json snapshot through f and has
// it written in the background (package snapsave). (Checkpoints follow the
// log's growth, not these saves: package ckptwrite.)
func (c *Core) saveSession(a *agent, f func(s *session.Session)) {
	c.snaps.Update(&a.Snap, a.ID(), f, nil)
}

// saveDelay waits SessionSaveDelay on the core's clock, or until the core
// stops. (The writers are not scheduler work: Close stops the scheduler
// before it cancels the turns whose ends save snapshots, and waits for the
// writers, through c.snaps.Wait, after it has cut their delay short.)
func (c *Core) saveDelay() {
	if d := c.opts.SessionSaveDelay; d > 0 {
		_ = schedule.Sleep(c.ctx, c.opts.Clock, d)
	}
}
