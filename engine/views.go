package engine

import (
	"github.com/warren-dev/warren/engine/internal/views"
)

// The API's views of the agents are built by package views from
// snapshots: the Core looks an agent up, copies its snapshot under a.mu
// (snapshot), releases the lock and calls the builder. The view types are
// views' (the daemon builds the wire shapes from them).
type (
	AgentView      = views.AgentView
	AgentDetail    = views.AgentDetail
	ChildView      = views.ChildView
	InboxItem      = views.InboxItem
	WaitInfo       = views.WaitInfo
	WaitView       = views.WaitView
	TerminatedView = views.TerminatedView
)

// snapshot copies what the views read of a.
func (c *Core) snapshot(a *agent) views.Snapshot { return a.Snapshot(c.tree.Path(a.ID())) }

func (c *Core) view(a *agent) AgentView { return views.View(c.snapshot(a), c.bootID, c.now()) }

// status is the agent's derived status (SPEC 4; views.Status).
func (c *Core) status(a *agent) string { return a.Status(c.bootID, c.now()) }

// List returns every agent, depth-first from the roots, then corrupt ones.
func (c *Core) List() []AgentView {
	as := c.agents.Ordered()
	out := make([]AgentView, 0, len(as))
	for _, a := range as {
		out = append(out, c.view(a))
	}
	return out
}

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
	v := c.view(a)
	var children []ChildView
	for _, id := range c.tree.Children(a.ID()) {
		if ch, okc := c.agent(id); okc {
			children = append(children, ChildView{ID: id, Name: ch.Name(), Status: c.status(ch)})
		}
	}
	d, msgs := views.Detail(v, children, a.Settings(sinceSeq, limit), limit, pageBytes)
	msgs, err := c.fillPayloads(a.ID(), msgs)
	if err != nil {
		return AgentDetail{}, err
	}
	if a.Log != nil {
		d.HasLog, d.LastSeq = true, a.Log.LastSeq()
	}
	d.Inbox = views.Inbox(msgs, c.displayName)
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
		if w, ok := views.Wait(c.snapshot(a)); ok {
			out = append(out, w)
		}
	}
	return out
}
