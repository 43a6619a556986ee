package engine

import (
	"context"
	"slices"
	"strings"

	"github.com/warren-dev/warren/eventlog"
)

// What the daemon remembers of its terminated agents, so that a message
// one sent (still in an inbox) shows who sent it, not a raw id (issue
// 14), and agent.list (all) can show them: each one's name and its
// parent's id, from which the path it had is rebuilt, and, once read,
// what the list shows of it (goneInfo, folded from its log by
// readGoneInfo). The registry has no lock of its own: the roster calls it
// under its lock, so that a terminated agent leaves the tree and enters
// the registry in one step.

// readGoneInfo reads what the list shows of a terminated agent from its
// log; what cannot be read stays empty (the list shows "-"), and is
// logged. It takes no lock.
func (c *Core) readGoneInfo(ctx context.Context, id string) *goneInfo {
	info := &goneInfo{}
	err := c.readEach(ctx, id, 0, 0, func(e eventlog.Entry) error {
		info.Fold(e)
		return nil
	})
	if err != nil {
		c.log.Warn("reading a terminated agent's log for agent.list", "agent", id, "err", err)
	}
	return info
}

// goneEntry is one terminated agent in the registry.
type goneEntry struct {
	name     string
	parentID string
	info     *goneInfo
}

// goneRegistry holds the terminated agents by id. The zero value is
// empty and ready; its owner serialises every call.
type goneRegistry struct {
	m map[string]goneEntry
	// gen counts the changes (budgets cache what they sum of it).
	gen int
}

// Remember records a terminated agent (its info unknown).
func (r *goneRegistry) Remember(id, name, parentID string) {
	if r.m == nil {
		r.m = make(map[string]goneEntry)
	}
	r.m[id] = goneEntry{name: name, parentID: parentID}
	r.gen++
}

// SetInfo records what the list shows of a terminated agent Remember
// recorded (nothing for another id).
func (r *goneRegistry) SetInfo(id string, info *goneInfo) {
	if g, ok := r.m[id]; ok {
		g.info = info
		r.m[id] = g
		r.gen++
	}
}

// Has reports whether id is a terminated agent the registry knows.
func (r *goneRegistry) Has(id string) bool {
	_, ok := r.m[id]
	return ok
}

// Path is the path a terminated agent had ("lead/w1"), or "" when the
// registry does not know the id. treePath gives the path of a live agent
// ("" for one not in the tree): the walk up the parents stops at the
// first live one.
func (r *goneRegistry) Path(id string, treePath func(id string) string) string {
	var parts []string
	for depth := 0; id != "" && depth < 64; depth++ {
		if p := treePath(id); p != "" {
			parts = append(parts, p)
			break
		}
		g, ok := r.m[id]
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

// Find returns the id of a terminated agent ref names: its id, its
// path, or its name when only one terminated agent had it ("" when none,
// or several, match).
func (r *goneRegistry) Find(ref string, treePath func(id string) string) string {
	if _, ok := r.m[ref]; ok {
		return ref
	}
	found := ""
	for id, g := range r.m {
		if g.name == ref || r.Path(id, treePath) == strings.TrimPrefix(ref, "/") {
			if found != "" {
				return ""
			}
			found = id
		}
	}
	return found
}

// Child is the id of parentID's terminated child named name ("" when
// none, or several).
func (r *goneRegistry) Child(parentID, name string) string {
	found := ""
	for id, g := range r.m {
		if g.parentID == parentID && g.name == name {
			if found != "" {
				return ""
			}
			found = id
		}
	}
	return found
}

// Unread lists the ids whose info is not known yet.
func (r *goneRegistry) Unread() []string {
	var unread []string
	for id, g := range r.m {
		if g.info == nil {
			unread = append(unread, id)
		}
	}
	return unread
}

// All lists the terminated agents, in no particular order.
func (r *goneRegistry) All() []goneAgent {
	out := make([]goneAgent, 0, len(r.m))
	for id, g := range r.m {
		out = append(out, goneAgent{ID: id, Name: g.name, ParentID: g.parentID, Info: g.info})
	}
	return out
}
