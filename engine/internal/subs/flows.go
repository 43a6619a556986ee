package subs

import (
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/engine/internal/notice"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/toolexec"
	"github.com/warren-dev/warren/tree"
)

// Agent is what the subscription steps need of an agent: the engine's
// record of it (agentrec.Agent), each method taking its lock itself.
type Agent interface {
	// Subscription reads its subscription id.
	Subscription(id string) (projection.Subscription, bool)
	// Append logs one entry in its log (store.Log's Append).
	Append(event string, data any) (eventlog.Entry, error)
}

// Env is what the subscription steps need of the engine, for agents of
// type A.
type Env[A Agent] interface {
	// Agent returns a live agent.
	Agent(id string) (A, bool)
	// Index adds sub of subscriber to the index when its target is alive
	// (under the lock termination takes); false when the target is gone
	// or terminating. Unindex removes it.
	Index(sub projection.Subscription, subscriber string) bool
	Unindex(sub projection.Subscription)
	// Now is the clock.
	Now() time.Time
	// Enqueue makes m durable in its recipient's inbox (after its checks).
	// EnqueueWith does too, logging with in the recipient's log in the same
	// write; dup reports that the recipient had m already (nothing is
	// written then).
	Enqueue(m inbox.Message) error
	EnqueueWith(m inbox.Message, with ...eventlog.Record) (dup bool, err error)
	Logger() hclog.Logger
}

// Subscribe indexes sub for subscriber and logs tool.subscribe in its
// log; alive is false (and nothing is logged) when the target is gone. A
// subscriber that is not a live agent is toolexec.ErrNoAgent.
func Subscribe[A Agent](env Env[A], subscriber string, sub projection.Subscription) (alive bool, err error) {
	a, ok := env.Agent(subscriber)
	if !ok {
		return false, toolexec.ErrNoAgent
	}
	// Indexing checks the target under the roster's lock, which termination
	// also takes: a subscription is either in place before the target's
	// terminated transition fires, or refused because the target is gone.
	if !env.Index(sub, subscriber) {
		return false, nil
	}
	if _, err := a.Append(schema.ToolSubscribe, schema.SubscribeData{SubscriptionID: sub.ID, TargetID: sub.Target,
		From: sub.From, To: sub.To, Once: sub.Once}); err != nil {
		env.Unindex(sub)
		return true, err
	}
	return true, nil
}

// Unsubscribe drops subscriber's subscription id (reason "unsubscribed");
// known is false when subscriber is not a live agent or has no such
// subscription.
func Unsubscribe[A Agent](env Env[A], subscriber, id string) (known bool, err error) {
	a, ok := env.Agent(subscriber)
	if !ok {
		return false, nil
	}
	sub, known := a.Subscription(id)
	if !known {
		return false, nil
	}
	return true, Drop(env, a, sub, "unsubscribed")
}

// Drop logs tool.unsubscribe with reason in subscriber's log, then
// removes sub from the index.
func Drop[A Agent](env Env[A], subscriber A, sub projection.Subscription, reason string) error {
	if _, err := subscriber.Append(schema.ToolUnsubscribe, schema.UnsubscribeData{SubscriptionID: sub.ID, Reason: reason}); err != nil {
		return fmt.Errorf("logging tool.unsubscribe: %w", err)
	}
	env.Unindex(sub)
	return nil
}

// Appender is an agent's log: one entry, or several in one write.
type Appender interface {
	Append(event string, data any) (eventlog.Entry, error)
	AppendBatch(recs []eventlog.Record) ([]eventlog.Entry, error)
}

// AppendWith logs recs and then owed (a transition's notices.owed, from
// Owed) in one write, and returns the entry of recs[0]; with nothing owed
// it logs recs as it would without subscriptions.
func AppendWith(l Appender, owed []eventlog.Record, recs ...eventlog.Record) (eventlog.Entry, error) {
	if len(recs) == 1 && len(owed) == 0 {
		return l.Append(recs[0].Event, recs[0].Data)
	}
	es, err := l.AppendBatch(append(recs, owed...))
	if err != nil || len(es) == 0 {
		return eventlog.Entry{}, err
	}
	return es[0], nil
}

// Key names the transition of a run's turn (notice ids derive from it);
// a transition outside any run is named by the agent's id.
func Key(runID string, turn int) string { return runID + "/" + strconv.Itoa(turn) }

// Owed is the notices.owed record for the transition of an agent from ->
// to (key names it: the agent's latest run and turn, or its id) that the
// subscriptions of watchers matching it are owed, to be logged in the
// same write as the transition; nil when none matches. Recovery delivers
// what a crash between that write and the notices kept from their
// subscribers (Deliver).
func Owed(watchers []Sub, from, to, key string) []eventlog.Record {
	var owed []schema.NoticeOwed
	for _, sub := range watchers {
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

// Deliver delivers the notices n owes (a notices.owed of the agent called
// name) to the subscribers that lack them and still hold the
// subscription; live after the transition's write, and again by recovery
// for every agent, which delivers only what a crash kept back (each
// notice's id is its subscription's and its transition's: a subscriber
// gets it once).
func Deliver[A Agent](env Env[A], name string, n projection.Notices) {
	for _, o := range n.Subscriptions {
		sa, ok := env.Agent(o.Subscriber)
		if !ok {
			continue
		}
		sub, ok := sa.Subscription(o.SubscriptionID)
		if !ok {
			continue // unsubscribed, or a once-subscription that fired
		}
		deliver(env, sa, Sub{Subscription: sub, Subscriber: o.Subscriber}, name, n.From, n.To, n.Key)
	}
}

// Notify delivers the notices of one transition of the agent called name
// from -> to to the watchers whose subscription matches it; key names the
// transition as for Owed. The notices' ids derive from the subscription
// and the transition, so recovering the same bytes twice (or firing again
// after a crash) produces the same notices. A failed delivery is logged
// and skipped; a once-subscription that fired is dropped (reason
// "fired"): its tool.unsubscribe is logged in the same write as its
// notice, so that no crash leaves the notice delivered and the
// subscription in place (to fire again).
func Notify[A Agent](env Env[A], watchers []Sub, name, from, to, key string) {
	for _, sub := range watchers {
		if !sub.Matches(from, to) {
			continue
		}
		if sa, ok := env.Agent(sub.Subscriber); ok {
			deliver(env, sa, sub, name, from, to, key)
		}
	}
}

// deliver sends sub's notice of a transition to its subscriber sa.
func deliver[A Agent](env Env[A], sa A, sub Sub, name, from, to, key string) {
	m := StateNotice(env, sub, name, from, to, key)
	if !sub.Once {
		if err := env.Enqueue(m); err != nil {
			env.Logger().Warn("delivering a subscription notice", "subscriber", sub.Subscriber, "err", err)
		}
		return
	}
	dup, err := env.EnqueueWith(m, eventlog.Record{Event: schema.ToolUnsubscribe,
		Data: schema.UnsubscribeData{SubscriptionID: sub.ID, Reason: "fired"}})
	switch {
	case err != nil:
		env.Logger().Warn("delivering a subscription notice", "subscriber", sub.Subscriber, "err", err)
	case dup:
		// Delivered by an earlier build, which logged tool.unsubscribe
		// in a write of its own: a crash could come between the two.
		if err := Drop(env, sa, sub.Subscription, "fired"); err != nil {
			env.Logger().Error("removing a fired once-subscription", "subscription", sub.ID, "err", err)
		}
	default:
		env.Unindex(sub.Subscription)
	}
}

// StateNotice is SYSTEM's notification to sub's subscriber of the
// transition key of the agent called name from -> to, stamped with clock's
// time.
func StateNotice(clock interface{ Now() time.Time }, sub Sub, name, from, to, key string) inbox.Message {
	m := toolexec.NewMessage(clock, notice.ID("state", sub.ID, key, from, to), tree.System, sub.Subscriber,
		inbox.KindNotification, notice.StateChange(name, from, to))
	m.Metadata["subscription_id"], m.Metadata["agent"], m.Metadata["from"], m.Metadata["to"] = sub.ID, name, from, to
	return m
}
