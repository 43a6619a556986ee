package views

import (
	"time"

	"github.com/warren-dev/warren/inbox"
)

// Agent is what the listings read of one agent, each method one look
// under the agent's own lock (package agentrec's record).
type Agent interface {
	ID() string
	Name() string
	Snapshot(path string) Snapshot
	Status(bootID string, now time.Time) string
	Settings(sinceSeq uint64, limit int) Settings
	// HasLiveWait lets Waits skip, without a snapshot, the agents that do
	// not wait.
	HasLiveWait() bool
	// LastSeq is the seq of the agent's last logged entry; false when the
	// agent has no open log (listed corrupt).
	LastSeq() (uint64, bool)
}

// Tree is what the listings read of the agent tree.
type Tree interface {
	Path(id string) string
	Children(id string) []string
}

// Lister builds agent.list, agent.inspect and waits.list over the agents
// of one engine. Each agent is read in one look under its lock and the
// view built after, with no lock held.
type Lister[A Agent] struct {
	// Ordered lists the loaded agents in agent.list's order (Order).
	Ordered func() []A
	Lookup  func(id string) (A, bool)
	Tree    Tree
	BootID  string
	Now     func() time.Time
	// Fill reads back the payloads a page of an owner's inbox does not
	// keep in memory.
	Fill func(owner string, msgs []inbox.Message) ([]inbox.Message, error)
	// Name is how a sender appears (a path, or an id once gone).
	Name func(id string) string
	// PageBytes bounds an inbox page's payload bytes beyond its first
	// message.
	PageBytes int64
}

// Snapshot copies what the views read of a (Agent.Snapshot at its path).
func (l Lister[A]) Snapshot(a A) Snapshot { return a.Snapshot(l.Tree.Path(a.ID())) }

// Status is a's derived status (SPEC 4).
func (l Lister[A]) Status(a A) string { return a.Status(l.BootID, l.Now()) }

func (l Lister[A]) view(a A) AgentView { return View(l.Snapshot(a), l.BootID, l.Now()) }

// List is every agent, in Ordered's order.
func (l Lister[A]) List() []AgentView {
	as := l.Ordered()
	out := make([]AgentView, 0, len(as))
	for _, a := range as {
		out = append(out, l.view(a))
	}
	return out
}

// Detail is agent.inspect of a with one page of its inbox: the pending
// messages logged after sinceSeq, at most limit of them (limit > 0) and
// about PageBytes of text (Detail, the function, says how the page ends).
func (l Lister[A]) Detail(a A, sinceSeq uint64, limit int) (AgentDetail, error) {
	v := l.view(a)
	var children []ChildView
	for _, id := range l.Tree.Children(a.ID()) {
		if ch, ok := l.Lookup(id); ok {
			children = append(children, ChildView{ID: id, Name: ch.Name(), Status: l.Status(ch)})
		}
	}
	d, msgs := Detail(v, children, a.Settings(sinceSeq, limit), limit, l.PageBytes)
	msgs, err := l.Fill(a.ID(), msgs)
	if err != nil {
		return AgentDetail{}, err
	}
	d.LastSeq, d.HasLog = a.LastSeq()
	d.Inbox = Inbox(msgs, l.Name)
	return d, nil
}

// Waits lists every pending wait (a live token on an open run) in
// Ordered's order.
func (l Lister[A]) Waits() []WaitView {
	var out []WaitView
	for _, a := range l.Ordered() {
		if !a.HasLiveWait() { // most agents: no snapshot (path, facts) to build and drop
			continue
		}
		if w, ok := Wait(l.Snapshot(a)); ok {
			out = append(out, w)
		}
	}
	return out
}
