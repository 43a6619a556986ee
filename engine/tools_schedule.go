package engine

import (
	"fmt"
	"slices"
	"time"

	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/tools"
)

// The tools of time and attention: remind_me, cancel_reminder, subscribe,
// unsubscribe and await_input.

// reminder is a reminder as remind_me schedules it.
type reminder struct {
	ID     string
	Reason string
	Due    time.Time // UTC
	Every  time.Duration
}

func (x toolExec) remindMe(v tools.RemindMe) (toolOutcome, error) {
	r := reminder{ID: x.derivedID("reminder", ""), Reason: v.Reason, Due: x.c.now().UTC().Add(v.Timeout), Every: v.Every}
	if err := x.c.scheduleReminder(x.self, r); err != nil {
		return toolOutcome{}, fmt.Errorf("logging reminder.scheduled: %w", err)
	}
	return toolDone(tools.RemindMeResult(r.ID)), nil
}

func (x toolExec) cancelReminder(v tools.CancelReminder) (toolOutcome, error) {
	known, err := x.c.cancelReminder(x.self, v.ReminderID)
	switch {
	case err != nil:
		return toolOutcome{}, fmt.Errorf("logging reminder.cancelled: %w", err)
	case !known:
		return toolFailed("unknown or already-fired reminder: %s", v.ReminderID), nil
	}
	return toolDone(tools.CancelReminderResult(v.ReminderID)), nil
}

func (x toolExec) subscribe(v tools.Subscribe) (toolOutcome, error) {
	if states := schema.SubscriptionStates(); !slices.Contains(states, v.From) || !slices.Contains(states, v.To) {
		return toolFailed("invalid transition %q: use from->to with states idle, busy, waiting, terminated or *", v.From+"->"+v.To), nil
	}
	target, err := x.c.tree.Lookup(x.self, v.AgentName)
	if err != nil {
		return toolFailed("%v", err), nil
	}
	sub := subscriptionRec{ID: x.derivedID("subscription", target), Target: target, From: v.From, To: v.To, Once: v.Once}
	alive, err := x.c.subscribe(x.self, sub)
	switch {
	case err != nil:
		return toolOutcome{}, fmt.Errorf("logging tool.subscribe: %w", err)
	case !alive:
		return toolFailed("agent %q is terminated", v.AgentName), nil
	}
	return toolDone(tools.SubscribeResult(sub.ID)), nil
}

func (x toolExec) unsubscribe(v tools.Unsubscribe) (toolOutcome, error) {
	known, err := x.c.unsubscribe(x.self, v.SubscriptionID)
	switch {
	case err != nil:
		return toolOutcome{}, err
	case !known:
		return toolFailed("unknown subscription: %s (you can remove only your own subscriptions)", v.SubscriptionID), nil
	}
	return toolDone(tools.UnsubscribeResult()), nil
}

func (x toolExec) awaitInput(v tools.AwaitInput) (toolOutcome, error) {
	if x.pos.RunID == "" {
		return toolFailed("await_input can only be called during a turn"), nil
	}
	a, ok := x.c.agent(x.self)
	if !ok {
		return toolOutcome{}, errNotFoundAgent
	}
	return toolOutcome{}, x.c.beginWait(a, v, x.pos.RunID, x.pos.Turn)
}
