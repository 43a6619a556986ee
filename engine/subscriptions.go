package engine

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/warren-dev/warren/engine/internal/notice"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/inbox"
	fold "github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/store"
	"github.com/warren-dev/warren/tree"
)

// State subscriptions (the subscribe tool, SPEC 6): which agents are told
// when an agent's state changes, and which transitions a subscription
// matches. The subscriptions themselves are durable in each subscriber's
// log (tool.subscribe, tool.unsubscribe) and folded into its projection;
// the index by target (subIndex, under the roster's lock) is rebuilt from
// the projections at recovery.
//
// subscribe indexes, then logs tool.subscribe (the index is undone when
// the log refuses); unsubscribe logs tool.unsubscribe, then unindexes. A
// transition that subscriptions match logs what it owes them
// (noticesFor: a notices.owed entry) in its own write (appendOwed);
// notify delivers it after the write, and recovery delivers it again to
// the subscribers a crash kept it from. Each notice is a SYSTEM
// notification under an id derived from the subscription and the
// transition; a once-subscription is dropped in the same write as its
// notice.
//
// The roster's lock, which termination also takes, serialises the index:
// a subscription is either in place before its target's terminated
// transition fires or refused because the target is gone.

// subscribe indexes sub for subscriber and logs tool.subscribe in its
// log; alive is false (and nothing is logged) when the target is gone. A
// subscriber that is not a live agent is errNotFoundAgent.
func (c *Core) subscribe(subscriber string, sub subscriptionRec) (alive bool, err error) {
	a, ok := c.agent(subscriber)
	if !ok {
		return false, errNotFoundAgent
	}
	if !c.agents.Index(sub, subscriber) {
		return false, nil
	}
	if _, err := a.Append(schema.ToolSubscribe, schema.SubscribeData{SubscriptionID: sub.ID, TargetID: sub.Target,
		From: sub.From, To: sub.To, Once: sub.Once}); err != nil {
		c.agents.Unindex(sub)
		return true, err
	}
	return true, nil
}

// unsubscribe drops subscriber's subscription id (reason "unsubscribed");
// known is false when subscriber is not a live agent or has no such
// subscription.
func (c *Core) unsubscribe(subscriber, id string) (known bool, err error) {
	a, ok := c.agent(subscriber)
	if !ok {
		return false, nil
	}
	sub, known := a.Subscription(id)
	if !known {
		return false, nil
	}
	return true, c.dropSubscription(a, sub, "unsubscribed")
}

// dropSubscription logs tool.unsubscribe with reason in subscriber's log,
// then removes sub from the index.
func (c *Core) dropSubscription(subscriber *agent, sub subscriptionRec, reason string) error {
	if _, err := subscriber.Append(schema.ToolUnsubscribe, schema.UnsubscribeData{SubscriptionID: sub.ID, Reason: reason}); err != nil {
		return fmt.Errorf("logging tool.unsubscribe: %w", err)
	}
	c.agents.Unindex(sub)
	return nil
}

// noticesFor is the notices.owed record for the transition of agent a
// from -> to (key names it: transitionKey) that the subscriptions
// watching a match, to be logged in the same write as the transition; nil
// when none matches. Recovery delivers what a crash between that write
// and the notices kept from their subscribers (notify).
func (c *Core) noticesFor(a *agent, from, to, key string) []eventlog.Record {
	var owed []schema.NoticeOwed
	for _, sub := range c.agents.Watchers(a.ID()) {
		if sub.Matches(from, to) {
			owed = append(owed, schema.NoticeOwed{SubscriptionID: sub.ID, Subscriber: sub.Subscriber})
		}
	}
	if len(owed) == 0 {
		return nil
	}
	sort.Slice(owed, func(i, j int) bool { return owed[i].SubscriptionID < owed[j].SubscriptionID })
	return []eventlog.Record{{Event: schema.NoticesOwed,
		Data: schema.NoticesOwedData{From: from, To: to, Key: key, Subscriptions: owed}}}
}

// appendOwed logs recs and then owed (a transition's notices.owed, from
// noticesFor) in one write, and returns the entry of recs[0]; with
// nothing owed it logs recs as it would without subscriptions.
func appendOwed(l store.Log, owed []eventlog.Record, recs ...eventlog.Record) (eventlog.Entry, error) {
	if len(recs) == 1 && len(owed) == 0 {
		return l.Append(recs[0].Event, recs[0].Data)
	}
	es, err := l.AppendBatch(append(recs, owed...))
	if err != nil || len(es) == 0 {
		return eventlog.Entry{}, err
	}
	return es[0], nil
}

// transitionKey names the transition of a run's turn (notice ids derive
// from it); a transition outside any run is named by the agent's id.
func transitionKey(runID string, turn int) string { return runID + "/" + strconv.Itoa(turn) }

// notify delivers the notices a's transitions owe (the notices.owed this
// process logged and has not delivered, or recovery's latest) to the
// subscribers that lack them and still hold the subscription; live after
// the transition's write, and again by recovery for every agent, which
// delivers only what a crash kept back (each notice's id is its
// subscription's and its transition's: a subscriber gets it once).
func (c *Core) notify(a *agent) {
	for _, n := range a.TakeNotices() {
		c.deliverOwed(a.Name(), n)
	}
}

// deliverOwed delivers the notices n owes (a notices.owed of the agent
// called name).
func (c *Core) deliverOwed(name string, n fold.Notices) {
	for _, o := range n.Subscriptions {
		sa, ok := c.agent(o.Subscriber)
		if !ok {
			continue
		}
		sub, ok := sa.Subscription(o.SubscriptionID)
		if !ok {
			continue // unsubscribed, or a once-subscription that fired
		}
		c.deliverNotice(sa, watcher{Subscription: sub, Subscriber: o.Subscriber}, name, n.From, n.To, n.Key)
	}
}

// notifyWatchers delivers the notices of one transition of the agent
// called name from -> to to the watchers whose subscription matches it
// (the watchers termination took from the index); key names the
// transition as for noticesFor. The notices' ids derive from the
// subscription and the transition, so recovering the same bytes twice
// (or firing again after a crash) produces the same notices.
func (c *Core) notifyWatchers(watchers []watcher, name, from, to, key string) {
	for _, sub := range watchers {
		if !sub.Matches(from, to) {
			continue
		}
		if sa, ok := c.agent(sub.Subscriber); ok {
			c.deliverNotice(sa, sub, name, from, to, key)
		}
	}
}

// deliverNotice sends sub's notice of a transition to its subscriber sa.
// A failed delivery is logged and skipped; a once-subscription that fired
// is dropped (reason "fired"): its tool.unsubscribe is logged in the same
// write as its notice, so that no crash leaves the notice delivered and
// the subscription in place (to fire again).
func (c *Core) deliverNotice(sa *agent, sub watcher, name, from, to, key string) {
	m := c.stateNotice(sub, name, from, to, key)
	if !sub.Once {
		if err := c.enqueue(m); err != nil {
			c.log.Warn("delivering a subscription notice", "subscriber", sub.Subscriber, "err", err)
		}
		return
	}
	dup, err := c.enqueueWith(m, eventlog.Record{Event: schema.ToolUnsubscribe,
		Data: schema.UnsubscribeData{SubscriptionID: sub.ID, Reason: "fired"}})
	switch {
	case err != nil:
		c.log.Warn("delivering a subscription notice", "subscriber", sub.Subscriber, "err", err)
	case dup:
		// Delivered before a crash, its unsubscribe with it, or (an older
		// log) alone: drop the subscription if it is still there.
		if err := c.dropSubscription(sa, sub.Subscription, "fired"); err != nil {
			c.log.Error("removing a fired once-subscription", "subscription", sub.ID, "err", err)
		}
	default:
		c.agents.Unindex(sub.Subscription)
	}
}

// stateNotice is SYSTEM's notification to sub's subscriber of the
// transition key of the agent called name from -> to.
func (c *Core) stateNotice(sub watcher, name, from, to, key string) inbox.Message {
	m := c.newMessage(notice.ID("state", sub.ID, key, from, to), tree.System, sub.Subscriber,
		inbox.KindNotification, notice.StateChange(name, from, to))
	m.Metadata["subscription_id"], m.Metadata["agent"], m.Metadata["from"], m.Metadata["to"] = sub.ID, name, from, to
	return m
}

// watcher is a subscription in the index, with its subscriber.
type watcher struct {
	fold.Subscription
	Subscriber string
}

// Matches reports whether the subscription asks for the transition from
// -> to ("*" matches any state).
func (s watcher) Matches(from, to string) bool {
	return (s.From == "*" || s.From == from) && (s.To == "*" || s.To == to)
}

// subIndex holds the subscriptions by target id, then subscription id.
// The zero value is empty and ready; its owner (the roster) serialises
// every call.
type subIndex struct {
	m map[string]map[string]watcher
}

// Add indexes a subscription of subscriber.
func (x *subIndex) Add(sub subscriptionRec, subscriber string) {
	if x.m == nil {
		x.m = map[string]map[string]watcher{}
	}
	m := x.m[sub.Target]
	if m == nil {
		m = map[string]watcher{}
		x.m[sub.Target] = m
	}
	m[sub.ID] = watcher{Subscription: sub, Subscriber: subscriber}
}

// Remove drops a subscription from the index.
func (x *subIndex) Remove(sub subscriptionRec) {
	delete(x.m[sub.Target], sub.ID)
}

// Of lists the subscriptions to target, in no particular order.
func (x *subIndex) Of(target string) []watcher {
	out := make([]watcher, 0, len(x.m[target]))
	for _, s := range x.m[target] {
		out = append(out, s)
	}
	return out
}

// DropAgent removes an agent that terminates from the index: the
// subscriptions to it, which it returns (they get its terminated
// transition), and those it made.
func (x *subIndex) DropAgent(id string) (watchers []watcher) {
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
