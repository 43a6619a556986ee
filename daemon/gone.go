package daemon

import (
	"slices"
	"strings"
)

// goneAgent is what the daemon remembers of a terminated agent so that a
// message it sent (still in an inbox) shows who sent it, not a raw id
// (issue 14): its name and its parent's id, from which the path it had is
// rebuilt.
type goneAgent struct {
	name     string
	parentID string
}

// rememberGone records a terminated agent; the caller holds c.mu.
func (c *Core) rememberGoneLocked(id, name, parentID string) {
	if c.gone == nil {
		c.gone = make(map[string]goneAgent)
	}
	c.gone[id] = goneAgent{name: name, parentID: parentID}
}

// gonePath is the path a terminated agent had ("lead/w1"), or "" when the
// daemon does not know the id.
func (c *Core) gonePath(id string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var parts []string
	for depth := 0; id != "" && depth < 64; depth++ {
		if p := c.tree.Path(id); p != "" {
			parts = append(parts, p)
			break
		}
		g, ok := c.gone[id]
		if !ok {
			if len(parts) == 0 {
				return ""
			}
			break
		}
		parts = append(parts, g.name)
		id = g.parentID
	}
	slices.Reverse(parts)
	return strings.Join(parts, "/")
}
