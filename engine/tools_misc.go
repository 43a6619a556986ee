package engine

import (
	"fmt"
	"strconv"
	"time"

	"github.com/warren-dev/warren/engine/internal/notice"
	"github.com/warren-dev/warren/engine/internal/subs"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/tree"
)

// The core's side of reminders and subscriptions (package toolexec holds
// the tools remind_me, cancel_reminder, subscribe and unsubscribe): timers,
// the subscription index, and the notices both send.

// armReminder starts the timer of a reminder recorded in the projection.
func (c *Core) armReminder(a *agent, id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.p.Reminders[id]
	if r == nil {
		return
	}
	next := r.Due
	if r.Every > 0 && !r.LastHit.IsZero() {
		next = r.LastHit.Add(r.Every)
	}
	c.sched.Arm(a.id, reminderTimer(id), next, func() { c.fireReminder(a, id) })
}

// fireReminder delivers a reminder's SYSTEM notification to its agent. It
// runs as a scheduler callback: never after Close, and Close waits for it.
func (c *Core) fireReminder(a *agent, id string) {
	a.remMu.Lock()
	defer a.remMu.Unlock()
	a.mu.Lock()
	r := a.p.Reminders[id]
	var reason string
	var every time.Duration
	if r != nil {
		reason, every = r.Reason, r.Every
	}
	a.mu.Unlock()
	if r == nil || a.terminated() {
		return
	}
	m := c.newMessage(newID(), tree.System, a.id, inbox.KindNotification, notice.Reminder(id, reason, every))
	m.Metadata["reminder_id"] = id
	if err := c.enqueue(m); err != nil {
		c.log.Error("delivering a reminder", "agent", a.id, "reminder", id, "err", err)
		return
	}
	if every > 0 {
		c.armReminder(a, id)
	}
}

// indexSubscription adds a subscription whose target is alive.
func (c *Core) indexSubscription(sub subscriptionRec, subscriber string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.agents[sub.Target]; !ok || t.terminating {
		return false
	}
	c.subIndex.Add(sub, subscriber)
	return true
}

func (c *Core) unindexSubscription(sub subscriptionRec) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.subIndex.Remove(sub)
}

func (c *Core) dropSubscription(subscriber *agent, sub subscriptionRec, reason string) error {
	if _, err := subscriber.log.Append(schema.ToolUnsubscribe, schema.UnsubscribeData{SubscriptionID: sub.ID, Reason: reason}); err != nil {
		return fmt.Errorf("logging tool.unsubscribe: %w", err)
	}
	c.unindexSubscription(sub)
	return nil
}

// fireTransition notifies the subscribers of an agent's state change.
func (c *Core) fireTransition(a *agent, from, to string) {
	c.mu.Lock()
	watchers := c.subIndex.Of(a.id)
	c.mu.Unlock()
	c.notifySubs(a.name(), watchers, from, to, a.transitionKey())
}

// transitionKey names the agent's current transition for notice ids: its
// latest run (a transition happens once per run and direction).
func (a *agent) transitionKey() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.p.Run != nil {
		return a.p.Run.RunID + "/" + strconv.Itoa(a.p.Run.Turn)
	}
	return a.id
}

// notifySubs delivers the notices of one transition. Their ids derive from
// the subscription and the transition, so recovering the same bytes twice
// (or re-firing after a crash) produces the same notices.
func (c *Core) notifySubs(name string, watchers []subs.Sub, from, to, key string) {
	for _, sub := range watchers {
		if !sub.Matches(from, to) {
			continue
		}
		sa, okA := c.agent(sub.Subscriber)
		if !okA {
			continue
		}
		m := c.newMessage(notice.ID("state", sub.ID, key, from, to), tree.System, sub.Subscriber, inbox.KindNotification,
			notice.StateChange(name, from, to))
		m.Metadata["subscription_id"] = sub.ID
		m.Metadata["agent"] = name
		m.Metadata["from"] = from
		m.Metadata["to"] = to
		if err := c.enqueue(m); err != nil {
			c.log.Warn("delivering a subscription notice", "subscriber", sub.Subscriber, "err", err)
			continue
		}
		if sub.Once {
			if err := c.dropSubscription(sa, sub.Subscription, "fired"); err != nil {
				c.log.Error("removing a fired once-subscription", "subscription", sub.ID, "err", err)
			}
		}
	}
}
