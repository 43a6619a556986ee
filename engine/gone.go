package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/schema"
)

// goneAgent is what the daemon remembers of a terminated agent so that a
// message it sent (still in an inbox) shows who sent it, not a raw id
// (issue 14): its name and its parent's id, from which the path it had is
// rebuilt; and, once agent.list with all has asked (or the agent was
// terminated by this daemon), what the list shows of it.
type goneAgent struct {
	name     string
	parentID string
	info     *goneInfo
}

// goneInfo is what agent.list (all) shows of a terminated agent beyond its
// path: read once from its log, which no longer changes.
type goneInfo struct {
	provider, model                     string
	createdAt, lastTurnAt, terminatedAt time.Time
	usage                               provider.Usage
}

// rememberGone records a terminated agent; the caller holds c.mu.
func (c *Core) rememberGoneLocked(id, name, parentID string) {
	if c.gone == nil {
		c.gone = make(map[string]goneAgent)
	}
	c.gone[id] = goneAgent{name: name, parentID: parentID}
}

// setGoneInfoLocked records what the list shows of a terminated agent;
// the caller holds c.mu.
func (c *Core) setGoneInfoLocked(id string, info *goneInfo) {
	if g, ok := c.gone[id]; ok {
		g.info = info
		c.gone[id] = g
	}
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

// TerminatedView is a terminated agent as agent.list shows it. Known says
// its log was read (provider, model, usage and times are set).
type TerminatedView struct {
	ID, Name, Path, ParentID string
	Known                    bool
	Provider, Model          string
	Usage                    provider.Usage
	CreatedAt, LastTurnAt    time.Time
	TerminatedAt             time.Time
}

// TerminatedList describes the terminated agents (agent.list items with
// status "terminated"), in no particular order. What is not known yet is
// read from their logs, once.
func (c *Core) TerminatedList() []TerminatedView {
	c.mu.Lock()
	var unread []string
	for id, g := range c.gone {
		if g.info == nil {
			unread = append(unread, id)
		}
	}
	c.mu.Unlock()
	for _, id := range unread {
		info := c.readGoneInfo(id)
		c.mu.Lock()
		c.setGoneInfoLocked(id, info)
		c.mu.Unlock()
	}
	c.mu.Lock()
	type item struct {
		id string
		g  goneAgent
	}
	items := make([]item, 0, len(c.gone))
	for id, g := range c.gone {
		items = append(items, item{id, g})
	}
	c.mu.Unlock()
	out := make([]TerminatedView, 0, len(items))
	for _, it := range items {
		v := TerminatedView{ID: it.id, Name: it.g.name, Path: c.gonePath(it.id), ParentID: it.g.parentID}
		if in := it.g.info; in != nil {
			v.Known, v.Provider, v.Model, v.Usage = true, in.provider, in.model, in.usage
			v.CreatedAt, v.LastTurnAt, v.TerminatedAt = in.createdAt, in.lastTurnAt, in.terminatedAt
		}
		out = append(out, v)
	}
	return out
}

// readGoneInfo reads what the list shows of a terminated agent from its
// log; what cannot be read stays empty (the list shows "-").
func (c *Core) readGoneInfo(id string) *goneInfo {
	info := &goneInfo{}
	r, err := c.st.Read(context.Background(), id, 0, 0)
	if err != nil {
		c.log.Warn("reading a terminated agent's log for agent.list", "agent", id, "err", err)
		return info
	}
	defer r.Close()
	for {
		e, err := r.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				c.log.Warn("reading a terminated agent's log for agent.list", "agent", id, "err", err)
			}
			return info
		}
		info.fold(e)
	}
}

// fold takes what the list shows from one entry.
func (in *goneInfo) fold(e eventlog.Entry) {
	switch e.Event {
	case schema.AgentCreated:
		var d schema.AgentCreatedData
		if json.Unmarshal(e.Data, &d) == nil {
			in.provider, in.model = d.Provider, d.Model
		}
		in.createdAt = e.TS
		if t, err := time.Parse(time.RFC3339Nano, d.CreatedAt); err == nil {
			in.createdAt = t
		}
	case schema.TurnStart:
		var d schema.TurnStartData
		if json.Unmarshal(e.Data, &d) == nil && d.Provider != "" {
			in.provider, in.model = d.Provider, d.Model
		}
		in.lastTurnAt = e.TS
	case schema.TurnComplete:
		if bytes.Contains(e.Data, []byte(`"usage"`)) {
			var d schema.TurnCompleteData
			if json.Unmarshal(e.Data, &d) == nil && d.Usage != nil {
				in.usage = in.usage.Add(*d.Usage)
			}
		}
	case schema.AgentTerminated:
		in.terminatedAt = e.TS
	}
}
