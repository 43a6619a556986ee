package daemon

import (
	"fmt"
	"strconv"
	"time"

	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/tools"
	"github.com/warren-dev/warren/tree"
)

func (c *Core) toolRemindMe(a *agent, v tools.RemindMe, cc callCtx) (toolOutcome, error) {
	id := cc.derivedID("reminder", "")
	due := c.now().UTC().Add(v.Timeout)
	if _, err := a.log.Append(evReminderSched, reminderData{ReminderID: id, Reason: v.Reason,
		Due: due.Format(time.RFC3339Nano), EveryMS: v.Every.Milliseconds()}); err != nil {
		return toolOutcome{}, fmt.Errorf("logging reminder.scheduled: %w", err)
	}
	c.armReminder(a, id)
	return ok(map[string]any{"status": "scheduled", "reminder_id": id}), nil
}

func (c *Core) toolCancelReminder(a *agent, v tools.CancelReminder) (toolOutcome, error) {
	// Serialised with firing: once the cancel returns, no notice of this
	// reminder is in flight.
	a.remMu.Lock()
	defer a.remMu.Unlock()
	a.mu.Lock()
	_, known := a.p.Reminders[v.ReminderID]
	a.mu.Unlock()
	if !known {
		return toolErr("unknown or already-fired reminder: %s", v.ReminderID), nil
	}
	if _, err := a.log.Append(evReminderCancel, reminderData{ReminderID: v.ReminderID}); err != nil {
		return toolOutcome{}, fmt.Errorf("logging reminder.cancelled: %w", err)
	}
	a.mu.Lock()
	if t := a.timers[v.ReminderID]; t != nil {
		t.Stop()
		delete(a.timers, v.ReminderID)
	}
	a.mu.Unlock()
	return ok(map[string]any{"status": "cancelled", "reminder_id": v.ReminderID}), nil
}

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
	d := next.Sub(c.now())
	if d < 0 {
		d = 0
	}
	if old := a.timers[id]; old != nil {
		old.Stop()
	}
	a.timers[id] = time.AfterFunc(d, func() { c.fireReminder(a, id) })
}

// fireReminder delivers a reminder's SYSTEM notification to its agent. Once
// the core is closed it does nothing, and Close waits for one in progress.
func (c *Core) fireReminder(a *agent, id string) {
	if !c.track() {
		return
	}
	defer c.wg.Done()
	a.remMu.Lock()
	defer a.remMu.Unlock()
	a.mu.Lock()
	r := a.p.Reminders[id]
	delete(a.timers, id)
	var reason string
	var every time.Duration
	if r != nil {
		reason, every = r.Reason, r.Every
	}
	a.mu.Unlock()
	if r == nil || a.terminated() {
		return
	}
	text := "Reminder: " + reason
	if every > 0 {
		text += fmt.Sprintf("\n(This reminder repeats every %s; cancel it with cancel_reminder(reminder_id=%q).)", every, id)
	}
	m := c.newMessage(newID(), tree.System, a.id, inbox.KindNotification, text)
	m.Metadata["reminder_id"] = id
	if err := c.enqueue(m); err != nil {
		c.log.Error("delivering a reminder", "agent", a.id, "reminder", id, "err", err)
		return
	}
	if every > 0 {
		c.armReminder(a, id)
	}
}

var subStates = map[string]bool{"idle": true, "busy": true, "waiting": true, "terminated": true, "*": true}

// indexedSub is a subscription in the core's index, by target.
type indexedSub struct {
	subscriptionRec
	Subscriber string
}

func (c *Core) toolSubscribe(a *agent, v tools.Subscribe, cc callCtx) (toolOutcome, error) {
	if !subStates[v.From] || !subStates[v.To] {
		return toolErr("invalid transition %q: use from->to with states idle, busy, waiting, terminated or *", v.From+"->"+v.To), nil
	}
	target, err := c.tree.Lookup(a.id, v.AgentName)
	if err != nil {
		return toolErr("%v", err), nil
	}
	sub := subscriptionRec{ID: cc.derivedID("subscription", target), Target: target, From: v.From, To: v.To, Once: v.Once}
	// Indexing checks the target under the core lock, which termination
	// also takes: a subscription is either in place before the target's
	// terminated transition fires, or refused because the target is gone.
	if !c.indexSubscription(sub, a.id) {
		return toolErr("agent %q is terminated", v.AgentName), nil
	}
	if _, err := a.log.Append(evToolSubscribe, subscribeData{SubscriptionID: sub.ID, TargetID: target,
		From: v.From, To: v.To, Once: v.Once}); err != nil {
		c.unindexSubscription(sub)
		return toolOutcome{}, fmt.Errorf("logging tool.subscribe: %w", err)
	}
	return ok(map[string]any{"subscription_id": sub.ID, "status": "active"}), nil
}

func (c *Core) toolUnsubscribe(a *agent, v tools.Unsubscribe) (toolOutcome, error) {
	a.mu.Lock()
	sub, known := a.p.Subs[v.SubscriptionID]
	a.mu.Unlock()
	if !known {
		return toolErr("unknown subscription: %s (you can remove only your own subscriptions)", v.SubscriptionID), nil
	}
	if err := c.dropSubscription(a, sub, "unsubscribed"); err != nil {
		return toolOutcome{}, err
	}
	return ok(map[string]any{"status": "removed"}), nil
}

// indexSubscription adds a subscription whose target is alive.
func (c *Core) indexSubscription(sub subscriptionRec, subscriber string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.agents[sub.Target]; !ok || t.terminating {
		return false
	}
	m := c.subIndex[sub.Target]
	if m == nil {
		m = map[string]indexedSub{}
		c.subIndex[sub.Target] = m
	}
	m[sub.ID] = indexedSub{subscriptionRec: sub, Subscriber: subscriber}
	return true
}

func (c *Core) unindexSubscription(sub subscriptionRec) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.subIndex[sub.Target], sub.ID)
}

func (c *Core) dropSubscription(subscriber *agent, sub subscriptionRec, reason string) error {
	if _, err := subscriber.log.Append(evToolUnsubscribe, unsubscribeData{SubscriptionID: sub.ID, Reason: reason}); err != nil {
		return fmt.Errorf("logging tool.unsubscribe: %w", err)
	}
	c.unindexSubscription(sub)
	return nil
}

// fireTransition notifies the subscribers of an agent's state change.
func (c *Core) fireTransition(a *agent, from, to string) {
	c.mu.Lock()
	subs := make([]indexedSub, 0, len(c.subIndex[a.id]))
	for _, s := range c.subIndex[a.id] {
		subs = append(subs, s)
	}
	c.mu.Unlock()
	c.notifySubs(a.name(), subs, from, to, a.transitionKey())
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
func (c *Core) notifySubs(name string, subs []indexedSub, from, to, key string) {
	for _, sub := range subs {
		if (sub.From != "*" && sub.From != from) || (sub.To != "*" && sub.To != to) {
			continue
		}
		sa, okA := c.agent(sub.Subscriber)
		if !okA {
			continue
		}
		m := c.newMessage(derivedNoticeID("state", sub.ID, key, from, to), tree.System, sub.Subscriber, inbox.KindNotification,
			fmt.Sprintf("[state] %s: %s -> %s", name, from, to))
		m.Metadata["subscription_id"] = sub.ID
		m.Metadata["agent"] = name
		m.Metadata["from"] = from
		m.Metadata["to"] = to
		if err := c.enqueue(m); err != nil {
			c.log.Warn("delivering a subscription notice", "subscriber", sub.Subscriber, "err", err)
			continue
		}
		if sub.Once {
			if err := c.dropSubscription(sa, sub.subscriptionRec, "fired"); err != nil {
				c.log.Error("removing a fired once-subscription", "subscription", sub.ID, "err", err)
			}
		}
	}
}

func (c *Core) toolAwaitInput(a *agent, v tools.AwaitInput, cc callCtx) (toolOutcome, error) {
	if cc.runID == "" {
		return toolErr("await_input can only be called during a turn"), nil
	}
	return toolOutcome{}, c.beginWait(a, v, cc)
}
