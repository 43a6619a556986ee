package engine

import (
	"errors"
	"sync"

	"github.com/warren-dev/warren/engine/internal/placement"
	fold "github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/tree"
)

// The roster is the engine's table of agents: the agents it serves by
// id, the terminated ones it remembers (gone.go), the agent
// directories recovery found quarantined, the subscriptions by target
// (subscriptions.go), whether the engine is closed or recovering, and the
// tree's changes that must happen in one step with those (an agent
// reserved while the engine is open, an agent leaving the tree and the
// table together). It resolves an agent reference to an agent served
// (Resolve) and lists the agents in agent.list's order (Ordered).
//
// # Locks
//
// One lock, the roster's, guards all of it; every method takes it and
// releases it before it returns, and calls nothing outside this package
// under it but the tree's, the gone registry's and the subscription
// index's methods, and Close's stop function (the engine stops its
// scheduler there, so the order is roster -> scheduler). An agent's
// record lock (the record, agent*.go) is never held with it: Parents reads the
// parents' records after it has let go, and the record's terminating flag
// (Terminating, SetTerminating) is the one field of a record written and
// read under the roster's lock instead of the record's.
//
// The tree has a lock of its own and is read without the roster's; only
// the changes listed above go through the roster.

// roster is the engine's table of agents. Make one with newRoster.
type roster struct {
	tree *tree.Tree

	mu         sync.Mutex
	agents     map[string]*agent
	closed     bool
	recovering bool
	draining   bool // wakes held for good: the daemon stops after its turns end
	// quarantine maps the id of each agent directory found in
	// <home>/quarantine at recovery to its path.
	quarantine map[string]string
	subs       subIndex
	gone       goneRegistry
}

// newRoster returns an empty, open roster over the engine's tree.
func newRoster(t *tree.Tree) *roster {
	return &roster{tree: t, agents: map[string]*agent{}}
}

// Get returns the agent served under id.
func (r *roster) Get(id string) (*agent, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a, ok := r.agents[id]
	return a, ok
}

// List returns the agents served, in no particular order.
func (r *roster) List() []*agent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.listLocked()
}

func (r *roster) listLocked() []*agent {
	out := make([]*agent, 0, len(r.agents))
	for _, a := range r.agents {
		out = append(out, a)
	}
	return out
}

// Count is the number of agents served.
func (r *roster) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.agents)
}

// Put serves a under id (a creation, recovery and takeover place agents
// while the engine may be serving).
func (r *roster) Put(id string, a *agent) {
	r.mu.Lock()
	r.agents[id] = a
	r.mu.Unlock()
}

// Close marks the roster closed and runs stop under its lock, so that
// whoever saw the engine open may still be refused by what stop stops,
// never the other way round. It returns the agents served; first is false
// when the roster was closed already.
func (r *roster) Close(stop func()) (agents []*agent, first bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	first = !r.closed
	r.closed = true
	stop()
	return r.listLocked(), first
}

// Closed reports whether Close has run.
func (r *roster) Closed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// SetRecovering holds wakes back (on) until recovery has rebuilt
// everything, or lets them go (off).
func (r *roster) SetRecovering(on bool) {
	r.mu.Lock()
	r.recovering = on
	r.mu.Unlock()
}

// SetDraining holds wakes back for good: the daemon lets running turns
// finish before it stops (Core.Drain).
func (r *roster) SetDraining() {
	r.mu.Lock()
	r.draining = true
	r.mu.Unlock()
}

// WakesHeld reports whether no wake may start a turn: the roster is
// closed, recovering or draining.
func (r *roster) WakesHeld() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed || r.recovering || r.draining
}

// Known reports whether id is served or remembered as terminated.
func (r *roster) Known(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.agents[id]
	return ok || r.gone.Has(id)
}

// Reserve adds a new agent's place to the tree, unless the roster is
// closed (closed is true, nothing added) or the tree refuses it (its
// error).
func (r *roster) Reserve(id, name, parentID string) (closed bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return true, nil
	}
	return false, r.tree.Add(id, name, parentID)
}

// Unreserve gives back a place Reserve took for a creation that failed.
func (r *roster) Unreserve(id string) {
	r.mu.Lock()
	_ = r.tree.Remove(id)
	r.mu.Unlock()
}

// Unlist takes a terminated agent out in one step: it is marked
// terminating (no subscription to it is indexed any more), its
// subscribers are dropped from the index and returned, it is remembered
// (with info) and it leaves the tree and the table.
func (r *roster) Unlist(a *agent, name, parentID string, info *goneInfo) (watchers []watcher) {
	r.mu.Lock()
	defer r.mu.Unlock()
	id := a.ID()
	a.SetTerminating()
	watchers = r.subs.DropAgent(id)
	r.gone.Remember(id, name, parentID)
	r.gone.SetInfo(id, info)
	_ = r.tree.Remove(id)
	delete(r.agents, id)
	return watchers
}

// Forget remembers an agent recovery found terminated in its log.
func (r *roster) Forget(id, name, parentID string) {
	r.mu.Lock()
	r.gone.Remember(id, name, parentID)
	r.mu.Unlock()
}

// GoneChild is the id of parentID's terminated child named name ("" when
// none, or several).
func (r *roster) GoneChild(parentID, name string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gone.Child(parentID, name)
}

// GonePath is the path a terminated agent had ("lead/w1"), or "" when the
// roster does not remember the id.
func (r *roster) GonePath(id string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gone.Path(id, r.tree.Path)
}

// Terminated returns the terminated agents remembered, their Info read
// by read (outside the lock, once per agent) where it is not known yet.
func (r *roster) Terminated(read func(id string) *goneInfo) []goneAgent {
	r.mu.Lock()
	unread := r.gone.Unread()
	r.mu.Unlock()
	for _, id := range unread {
		info := read(id)
		r.mu.Lock()
		r.gone.SetInfo(id, info)
		r.mu.Unlock()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gone.All()
}

// GoneGen counts the changes of the terminated agents remembered.
func (r *roster) GoneGen() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gone.gen
}

// GoneSpends returns, with the registry's generation, each terminated
// agent's parent and spend, their info read by read (outside the lock)
// where it is not known yet.
func (r *roster) GoneSpends(read func(id string) *goneInfo) (int, map[string]goneSpend) {
	r.Terminated(read)
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]goneSpend, len(r.gone.m))
	for id, g := range r.gone.m {
		gs := goneSpend{parentID: g.parentID}
		if g.info != nil {
			gs.spent = g.info.Spent
		}
		out[id] = gs
	}
	return r.gone.gen, out
}

// goneSpend is one terminated agent as budgets see it.
type goneSpend struct {
	parentID string
	spent    fold.Spent
}

// SetQuarantine records the quarantined agent directories (id to path).
func (r *roster) SetQuarantine(q map[string]string) {
	r.mu.Lock()
	r.quarantine = q
	r.mu.Unlock()
}

// QuarantinedAs is the path id's directory was quarantined at ("" when
// it was not).
func (r *roster) QuarantinedAs(id string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.quarantine[id]
}

// Quarantined is how many agent directories are quarantined.
func (r *roster) Quarantined() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.quarantine)
}

// Parents tells recovery what it needs of each candidate's parent: served
// or not and quarantined or not under the roster's lock, then, under each
// served parent's own lock, whether its log could not be opened.
func (r *roster) Parents(cands []placement.Candidate) map[string]placement.Parent {
	listed := map[string]*agent{}
	parents := map[string]placement.Parent{}
	r.mu.Lock()
	for _, cd := range cands {
		a, ok := r.agents[cd.Parent]
		if ok && a != nil {
			listed[cd.Parent] = a
		}
		_, inTree := r.tree.Get(cd.Parent)
		parents[cd.Parent] = placement.Parent{Listed: ok, InTree: ok && inTree, Quarantined: r.quarantine[cd.Parent] != "",
			Gone: r.gone.Has(cd.Parent)}
	}
	r.mu.Unlock()
	for id, a := range listed {
		p := parents[id]
		p.Unopened = errors.Is(a.Corrupt(), errUnopened)
		parents[id] = p
	}
	return parents
}

// Index adds a subscription whose target is served and not terminating;
// false when it is not.
func (r *roster) Index(sub fold.Subscription, subscriber string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t, ok := r.agents[sub.Target]; !ok || t.Terminating() {
		return false
	}
	r.subs.Add(sub, subscriber)
	return true
}

// Unindex removes a subscription from the index.
func (r *roster) Unindex(sub fold.Subscription) {
	r.mu.Lock()
	r.subs.Remove(sub)
	r.mu.Unlock()
}

// Watchers returns the subscriptions to target.
func (r *roster) Watchers(target string) []watcher {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.subs.Of(target)
}
