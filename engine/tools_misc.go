package engine

import (
	"github.com/warren-dev/warren/engine/internal/subs"
)

// The core's side of reminders and subscriptions (package toolexec holds
// the tools remind_me, cancel_reminder, subscribe and unsubscribe;
// packages reminders and subs the steps, against the Core as mailEnv).

// indexSubscription adds a subscription whose target is alive.
func (c *Core) indexSubscription(sub subscriptionRec, subscriber string) bool {
	return c.agents.Index(sub, subscriber)
}

// fireTransition notifies the subscribers of an agent's state change.
func (c *Core) fireTransition(a *agent, from, to string) {
	subs.Notify[*agent](c.mail(), c.agents.Watchers(a.ID()), a.Name(), from, to, a.TransitionKey())
}
