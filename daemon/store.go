package daemon

import (
	"path"

	"github.com/warren-dev/warren/session"
)

// The daemon's durable logs and session snapshots go through c.st
// (CoreOptions.Store): store/local by default, store/jetstream with a
// cluster. What stays local-only, under Home on this machine whatever the
// store, is what one daemon keeps for itself and never another reads:
// checkpoints (a cache of a fold), procs records, stderr files, and the
// repair/quarantine/torn copies of local files (docs/DECISIONS.md, "The
// daemon on the store seam").

// snapshotPath is the session.json of id in the local home (moved aside
// when unreadable).
func (c *Core) snapshotPath(id string) string {
	return path.Join(c.agentsDir, id, session.FileName)
}
