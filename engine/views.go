package engine

import (
	"github.com/warren-dev/warren/engine/internal/views"
	"github.com/warren-dev/warren/session"
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

// snapshot copies what the views read of a, under a.mu.
func (c *Core) snapshot(a *agent) views.Snapshot {
	a.mu.Lock()
	defer a.mu.Unlock()
	return views.Take(a.p, views.Flags{ID: a.id, Path: c.tree.Path(a.id), Session: a.snap.Get(), Busy: a.busy,
		Degraded: a.degradedLocked(), Corrupt: a.corrupt})
}

func (c *Core) view(a *agent) AgentView { return views.View(c.snapshot(a), c.bootID, c.now()) }

// facts reads the latest run's facts from the projection. The caller holds
// a.mu.
func (a *agent) facts() session.Facts { return views.Facts(a.p, a.corrupt != nil) }

// status is the agent's derived status (SPEC 4; views.Status).
func (c *Core) status(a *agent) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return views.Status(a.snap.Get(), a.facts(), a.busy, c.bootID, c.now())
}

// listed returns the loaded agents in agent.list's order (views.Order).
func (c *Core) listed() []*agent {
	walk := c.tree.Walk()
	all := c.agentList()
	byID := make(map[string]*agent, len(all))
	ids := make([]string, 0, len(all))
	for _, a := range all {
		byID[a.id] = a
		ids = append(ids, a.id)
	}
	out := make([]*agent, 0, len(all))
	for _, id := range views.Order(walk, ids) {
		out = append(out, byID[id])
	}
	return out
}

// List returns every agent, depth-first from the roots, then corrupt ones.
func (c *Core) List() []AgentView {
	as := c.listed()
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
	for _, id := range c.tree.Children(a.id) {
		if ch, okc := c.agent(id); okc {
			children = append(children, ChildView{ID: id, Name: ch.name(), Status: c.status(ch)})
		}
	}
	a.mu.Lock()
	set := views.TakeSettings(a.p, sinceSeq, limit)
	a.mu.Unlock()
	d, msgs := views.Detail(v, children, set, limit, pageBytes)
	msgs, err := c.fillPayloads(a.id, msgs)
	if err != nil {
		return AgentDetail{}, err
	}
	if a.log != nil {
		d.HasLog, d.LastSeq = true, a.log.LastSeq()
	}
	d.Inbox = views.Inbox(msgs, c.displayName)
	return d, nil
}

// Waits lists every pending wait in the tree (a live token on an open
// run), in tree order: whoever started it and whether or not anyone
// watched, the operator can find it here and answer it by token id.
func (c *Core) Waits() []WaitView {
	var out []WaitView
	for _, a := range c.listed() {
		a.mu.Lock()
		live := a.hasLiveWait()
		a.mu.Unlock()
		if !live { // most agents: no snapshot (path, facts) to build and drop
			continue
		}
		if w, ok := views.Wait(c.snapshot(a)); ok {
			out = append(out, w)
		}
	}
	return out
}
