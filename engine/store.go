package engine

import (
	"fmt"
	"path"

	"github.com/warren-dev/warren/session"
	"github.com/warren-dev/warren/store"
	"github.com/warren-dev/warren/tree"
)

// The daemon's durable logs and session snapshots go through c.st
// (CoreOptions.Store): store/local by default, store/jetstream with a
// cluster; checkpoints too on a store that keeps its own (ckptstore.go).
// What stays local-only, under Home on this machine whatever the store, is
// what one daemon keeps for itself and no other daemon reads: procs
// records, stderr files, and the repair/quarantine/torn copies of local
// files (docs/DECISIONS.md, "The daemon on the store seam").

// snapshotPath is the session.json of id in the local home (moved aside
// when unreadable).
func (c *Core) snapshotPath(id string) string {
	return path.Join(c.agentsDir, id, session.FileName)
}

// own claims id for this Core (package claims), reusing a claim it holds
// that is not lost. A lease that can be lost (a cluster store) is watched:
// losing it releases the agent.
func (c *Core) own(id string) (store.Lease, error) { return c.claims.Own(id, 0) }

// leaseLost releases an agent whose lease was lost.
func (c *Core) leaseLost(id string) {
	c.releaseAgent(id, fmt.Errorf("the lease on agent %s was lost (another daemon may claim it)", id))
}

// releaseAgent stops an agent this daemon may no longer write for (its log
// was fenced by another owner, or its lease was lost): the running turn is
// cancelled and no turn starts again in this process. Its log refuses
// appends, as after a failed fsync, so nothing more is written for it.
func (c *Core) releaseAgent(id string, cause error) {
	if id == tree.User {
		c.log.Error("this daemon may no longer write the USER inbox", "err", cause)
		c.userLostOnce.Do(func() { close(c.userLost) })
		return
	}
	a, ok := c.agent(id)
	if !ok {
		return
	}
	first, cancel := a.MarkReleased(cause)
	if !first {
		return
	}
	c.log.Error("agent released: its turns stop in this daemon", "agent", id, "err", cause)
	if cancel != nil {
		cancel(cause)
	}
}
