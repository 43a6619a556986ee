package engine

import (
	"github.com/warren-dev/warren/engine/internal/gone"
	"github.com/warren-dev/warren/engine/internal/views"
)

// The terminated agents the daemon remembers (package gone), in the
// roster, so a message one sent still shows who sent it (issue 14).

// gonePath is the path a terminated agent had ("lead/w1"), or "" when the
// daemon does not know the id.
func (c *Core) gonePath(id string) string { return c.agents.GonePath(id) }

// TerminatedList describes the terminated agents (agent.list items with
// status "terminated"), in no particular order. What is not known yet is
// read from their logs, once.
func (c *Core) TerminatedList() []TerminatedView {
	items := c.agents.Terminated(func(id string) *gone.Info { return gone.ReadInfo(c.st, id, c.log) })
	out := make([]TerminatedView, 0, len(items))
	for _, it := range items {
		out = append(out, views.Terminated(it, c.gonePath(it.ID)))
	}
	return out
}
