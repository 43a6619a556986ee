package engine

import (
	"github.com/warren-dev/warren/engine/internal/gone"
	"github.com/warren-dev/warren/engine/internal/views"
)

// The terminated agents the daemon remembers (package gone), in c.gone
// under c.mu, so a message one sent still shows who sent it (issue 14).

// gonePath is the path a terminated agent had ("lead/w1"), or "" when the
// daemon does not know the id.
func (c *Core) gonePath(id string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gone.Path(id, c.tree.Path)
}

// TerminatedList describes the terminated agents (agent.list items with
// status "terminated"), in no particular order. What is not known yet is
// read from their logs, once.
func (c *Core) TerminatedList() []TerminatedView {
	c.mu.Lock()
	unread := c.gone.Unread()
	c.mu.Unlock()
	for _, id := range unread {
		info := gone.ReadInfo(c.st, id, c.log)
		c.mu.Lock()
		c.gone.SetInfo(id, info)
		c.mu.Unlock()
	}
	c.mu.Lock()
	items := c.gone.All()
	c.mu.Unlock()
	out := make([]TerminatedView, 0, len(items))
	for _, it := range items {
		out = append(out, views.Terminated(it, c.gonePath(it.ID)))
	}
	return out
}
