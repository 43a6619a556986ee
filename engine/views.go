package engine

import (
	"context"
)

// The API's views of the agents (agent.list, agent.inspect, waits.list):
// each agent is read in one look under its record's lock (its snapshot,
// agent.Snapshot) and the view is built after, by the pure functions of
// views_build.go; the view types are in views_types.go and the daemon
// builds the wire shapes from them.

// List returns every agent, depth-first from the roots, then corrupt ones.
func (c *Core) List() []AgentView {
	as := c.agents.Ordered()
	out := make([]AgentView, 0, len(as))
	for _, a := range as {
		out = append(out, c.view(a))
	}
	return out
}

// ListPage returns one page of List: the agents after the one with id
// after ("" = from the first), at most limit of them (0: DefaultPageLimit)
// and, beyond the first, about pageBytes of paths and errors, so a reply
// stays well inside a frame whatever the tree; next is the id to pass as
// after for the next page ("" when this one is the last). keep, when not
// nil, filters by status. Only the page's agents are read and their paths
// built: a page costs its own agents, not the whole tree (issue 31, D5).
func (c *Core) ListPage(after string, limit int, keep func(status string) bool) (page []AgentView, next string) {
	if limit <= 0 {
		limit = DefaultPageLimit
	}
	as := c.agents.Ordered()
	start := 0
	if after != "" {
		start = len(as) // an id no longer listed: nothing follows it
		for i, a := range as {
			if a.ID() == after {
				start = i + 1
				break
			}
		}
	}
	size := 0
	for i := start; i < len(as); i++ {
		if len(page) == limit || (len(page) > 0 && size > pageBytes) {
			return page, page[len(page)-1].ID
		}
		v := c.view(as[i])
		if keep != nil && !keep(v.Status) {
			continue
		}
		size += len(v.Path) + len(v.Error) + len(v.Name) + 256
		page = append(page, v)
	}
	return page, ""
}

// Inspect describes one agent in detail, with the first page of its inbox.
func (c *Core) Inspect(ctx context.Context, agentID string) (AgentDetail, error) {
	return c.InspectPage(ctx, agentID, 0, 0)
}

// InspectPage describes one agent in detail, with one page of its inbox:
// the pending messages logged after sinceSeq, at most limit of them (0:
// the default page size) and about pageBytes of text; InboxNextSeq is
// the since_seq of the next page, set while more messages follow.
func (c *Core) InspectPage(ctx context.Context, agentID string, sinceSeq uint64, limit int) (AgentDetail, error) {
	if limit <= 0 {
		limit = DefaultPageLimit
	}
	a, ok := c.agent(agentID)
	if !ok {
		return AgentDetail{}, notFound(agentID)
	}
	v := c.view(a)
	var children []ChildView
	for _, id := range c.tree.Children(a.ID()) {
		if ch, ok := c.agent(id); ok {
			children = append(children, ChildView{ID: id, Name: ch.Name(), Status: ch.Status(c.bootID, c.now())})
		}
	}
	d, msgs := buildDetail(v, children, a.Settings(sinceSeq, limit), limit, pageBytes)
	msgs, err := c.fillPayloads(ctx, a.ID(), msgs)
	if err != nil {
		return AgentDetail{}, err
	}
	d.LastSeq, d.HasLog = a.LastSeq()
	d.Inbox = inboxItems(msgs, c.displayName)
	return d, nil
}

// Waits lists every pending wait in the tree (a live token on an open
// run), in tree order: whoever started it and whether or not anyone
// watched, the operator can find it here and answer it by token id.
func (c *Core) Waits() []WaitView {
	var out []WaitView
	for _, a := range c.agents.Ordered() {
		if !a.HasLiveWait() { // most agents: no snapshot (path, facts) to build and drop
			continue
		}
		if w, ok := waitView(c.snapshot(a)); ok {
			out = append(out, w)
		}
	}
	return out
}

// snapshot reads agent a in one look, with its path in the tree.
func (c *Core) snapshot(a *agent) agentSnapshot { return a.Snapshot(c.tree.Path(a.ID())) }

// view is agent.list's view of a.
func (c *Core) view(a *agent) AgentView { return buildView(c.snapshot(a), c.bootID, c.now()) }

// gonePath is the path a terminated agent had ("lead/w1"), or "" when the
// daemon does not know the id (the roster's gone registry, gone.go).
func (c *Core) gonePath(id string) string { return c.agents.GonePath(id) }

// TerminatedList describes the terminated agents (agent.list items with
// status "terminated"), in no particular order. What is not known yet is
// read from their logs, once.
func (c *Core) TerminatedList(ctx context.Context) []TerminatedView {
	items := c.agents.Terminated(func(id string) *goneInfo { return c.readGoneInfo(ctx, id) })
	out := make([]TerminatedView, 0, len(items))
	for _, it := range items {
		out = append(out, terminatedView(it, c.gonePath(it.ID)))
	}
	return out
}
