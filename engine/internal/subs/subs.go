// Package subs is the index of state subscriptions by target (the
// subscribe tool, SPEC 6): which agents are told when an agent's state
// changes, and which transitions a subscription matches. The
// subscriptions themselves are durable in each subscriber's log
// (tool.subscribe, tool.unsubscribe) and folded into its projection; the
// index is rebuilt from the projections at recovery.
//
// The steps (flows.go) subscribe (index, then log tool.subscribe; undo the
// index when the log refuses), unsubscribe (log tool.unsubscribe, then
// unindex) and send the notices of one transition (a SYSTEM notification
// per matching subscription, under an id derived from the subscription and
// the transition; a once-subscription is dropped in the same write as its
// notice). A transition that subscriptions match logs what it owes them
// (Owed: a notices.owed entry) in its own write; Deliver sends it after the
// write, and recovery sends it again to the subscribers a crash kept it
// from. What the steps do to the agents and the engine goes through Env.
//
// # Locks
//
// An Index has no lock of its own: its owner serialises every call. The
// engine calls it under its roster's lock, which termination also
// takes, so a subscription is either in place before its target's
// terminated transition fires or refused because the target is gone.
// The steps take no lock; Env's and Agent's methods take the engine's,
// one after the other, never across another method.
package subs

import "github.com/warren-dev/warren/projection"

// Sub is a subscription in the index.
type Sub struct {
	projection.Subscription
	Subscriber string
}

// Matches reports whether the subscription asks for the transition from
// -> to ("*" matches any state).
func (s Sub) Matches(from, to string) bool {
	return (s.From == "*" || s.From == from) && (s.To == "*" || s.To == to)
}

// Index holds the subscriptions by target id, then subscription id. The
// zero value is empty and ready.
type Index struct {
	m map[string]map[string]Sub
}

// Add indexes a subscription of subscriber.
func (x *Index) Add(sub projection.Subscription, subscriber string) {
	if x.m == nil {
		x.m = map[string]map[string]Sub{}
	}
	m := x.m[sub.Target]
	if m == nil {
		m = map[string]Sub{}
		x.m[sub.Target] = m
	}
	m[sub.ID] = Sub{Subscription: sub, Subscriber: subscriber}
}

// Remove drops a subscription from the index.
func (x *Index) Remove(sub projection.Subscription) {
	delete(x.m[sub.Target], sub.ID)
}

// Of lists the subscriptions to target, in no particular order.
func (x *Index) Of(target string) []Sub {
	out := make([]Sub, 0, len(x.m[target]))
	for _, s := range x.m[target] {
		out = append(out, s)
	}
	return out
}

// DropAgent removes an agent that terminates from the index: the
// subscriptions to it, which it returns (they get its terminated
// transition), and those it made.
func (x *Index) DropAgent(id string) (watchers []Sub) {
	watchers = x.Of(id)
	delete(x.m, id)
	for _, subs := range x.m {
		for sid, s := range subs {
			if s.Subscriber == id {
				delete(subs, sid)
			}
		}
	}
	return watchers
}
