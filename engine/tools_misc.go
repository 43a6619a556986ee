package engine

import (
	"github.com/warren-dev/warren/engine/internal/subs"
	"github.com/warren-dev/warren/eventlog"
)

// The core's side of reminders and subscriptions (package toolexec holds
// the tools remind_me, cancel_reminder, subscribe and unsubscribe;
// packages reminders and subs the steps, against the Core as mailEnv).

// indexSubscription adds a subscription whose target is alive.
func (c *Core) indexSubscription(sub subscriptionRec, subscriber string) bool {
	return c.agents.Index(sub, subscriber)
}

// noticesFor is the notices.owed record a's transition from -> to (named
// key, subs.Key) is logged with: what it owes the subscriptions to a that
// match it (subs.Owed; none when none does).
func (c *Core) noticesFor(a *agent, from, to, key string) []eventlog.Record {
	return subs.Owed(c.agents.Watchers(a.ID()), from, to, key)
}

// notify delivers the notices a's logged transitions owe that it has not
// delivered (after a transition's write; by recovery, the latest, for what
// a crash kept back).
func (c *Core) notify(a *agent) {
	for _, n := range a.TakeNotices() {
		subs.Deliver[*agent](c.mail(), a.Name(), n)
	}
}
