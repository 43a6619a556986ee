package engine

import (
	"context"

	"github.com/warren-dev/warren/engine/internal/views"
)

// The API's views of the agents are built by package views (a Lister
// over the roster and the tree): each agent is read in one look under its
// a.mu and the view is built after. The view types are views' (the daemon
// builds the wire shapes from them).
type (
	AgentView      = views.AgentView
	AgentDetail    = views.AgentDetail
	ChildView      = views.ChildView
	InboxItem      = views.InboxItem
	WaitInfo       = views.WaitInfo
	WaitView       = views.WaitView
	TerminatedView = views.TerminatedView
)

// views lists the agents of this core (package views).
func (c *Core) views() views.Lister[*agent] {
	return views.Lister[*agent]{Ordered: c.agents.Ordered, Lookup: c.agent, Tree: c.tree, BootID: c.bootID, Now: c.now,
		Fill: c.filler(c.ctx), Name: c.displayName, PageBytes: pageBytes}
}

// List returns every agent, depth-first from the roots, then corrupt ones.
func (c *Core) List() []AgentView { return c.views().List() }

// Inspect describes one agent in detail, with the first page of its inbox.
func (c *Core) Inspect(agentID string) (AgentDetail, error) {
	return c.InspectPage(agentID, 0, 0)
}

// InspectPage describes one agent in detail, with one page of its inbox:
// the pending messages logged after sinceSeq, at most limit of them (0:
// the default page size) and about pageBytes of text; InboxNextSeq is
// the since_seq of the next page, set while more messages follow.
func (c *Core) InspectPage(agentID string, sinceSeq uint64, limit int) (AgentDetail, error) {
	if limit <= 0 {
		limit = DefaultPageLimit
	}
	a, ok := c.agent(agentID)
	if !ok {
		return AgentDetail{}, notFound(agentID)
	}
	return c.views().Detail(a, sinceSeq, limit)
}

// Waits lists every pending wait in the tree (a live token on an open
// run), in tree order: whoever started it and whether or not anyone
// watched, the operator can find it here and answer it by token id.
func (c *Core) Waits() []WaitView { return c.views().Waits() }

// The terminated agents the daemon remembers (package gone), in the
// roster, so a message one sent still shows who sent it (issue 14).

// gonePath is the path a terminated agent had ("lead/w1"), or "" when the
// daemon does not know the id.
func (c *Core) gonePath(id string) string { return c.agents.GonePath(id) }

// TerminatedList describes the terminated agents (agent.list items with
// status "terminated"), in no particular order. What is not known yet is
// read from their logs, once.
func (c *Core) TerminatedList(ctx context.Context) []TerminatedView {
	items := c.agents.Terminated(func(id string) *views.TerminatedInfo { return c.readGoneInfo(ctx, id) })
	out := make([]TerminatedView, 0, len(items))
	for _, it := range items {
		out = append(out, views.Terminated(it, c.gonePath(it.ID)))
	}
	return out
}
