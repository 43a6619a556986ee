package engine

import (
	"github.com/warren-dev/warren/engine/internal/subs"
)

// The core's side of reminders and subscriptions (package toolexec holds
// the tools remind_me, cancel_reminder, subscribe and unsubscribe;
// packages reminders and subs the steps, against the Core as mailEnv).

// indexSubscription adds a subscription whose target is alive.
func (c *Core) indexSubscription(sub subscriptionRec, subscriber string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.agents[sub.Target]; !ok || t.Terminating() {
		return false
	}
	c.subIndex.Add(sub, subscriber)
	return true
}

// fireTransition notifies the subscribers of an agent's state change.
func (c *Core) fireTransition(a *agent, from, to string) {
	c.mu.Lock()
	watchers := c.subIndex.Of(a.ID())
	c.mu.Unlock()
	subs.Notify[*agent](c.mail(), watchers, a.Name(), from, to, a.TransitionKey())
}
