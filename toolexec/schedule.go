package toolexec

import (
	"fmt"
	"slices"

	"github.com/warren-dev/warren/schema"

	"github.com/warren-dev/warren/tools"
)

func (x exec) remindMe(v tools.RemindMe) (Outcome, error) {
	r := Reminder{ID: x.derivedID("reminder", ""), Reason: v.Reason, Due: x.env.Now().UTC().Add(v.Timeout), Every: v.Every}
	if err := x.env.ScheduleReminder(x.self, r); err != nil {
		return Outcome{}, fmt.Errorf("logging reminder.scheduled: %w", err)
	}
	return done(tools.RemindMeResult(r.ID)), nil
}

func (x exec) cancelReminder(v tools.CancelReminder) (Outcome, error) {
	known, err := x.env.CancelReminder(x.self, v.ReminderID)
	switch {
	case err != nil:
		return Outcome{}, fmt.Errorf("logging reminder.cancelled: %w", err)
	case !known:
		return failed("unknown or already-fired reminder: %s", v.ReminderID), nil
	}
	return done(tools.CancelReminderResult(v.ReminderID)), nil
}

func (x exec) subscribe(v tools.Subscribe) (Outcome, error) {
	if states := schema.SubscriptionStates(); !slices.Contains(states, v.From) || !slices.Contains(states, v.To) {
		return failed("invalid transition %q: use from->to with states idle, busy, waiting, terminated or *", v.From+"->"+v.To), nil
	}
	target, err := x.env.Lookup(x.self, v.AgentName)
	if err != nil {
		return failed("%v", err), nil
	}
	sub := Subscription{ID: x.derivedID("subscription", target), Target: target, From: v.From, To: v.To, Once: v.Once}
	alive, err := x.env.Subscribe(x.self, sub)
	switch {
	case err != nil:
		return Outcome{}, fmt.Errorf("logging tool.subscribe: %w", err)
	case !alive:
		return failed("agent %q is terminated", v.AgentName), nil
	}
	return done(tools.SubscribeResult(sub.ID)), nil
}

func (x exec) unsubscribe(v tools.Unsubscribe) (Outcome, error) {
	known, err := x.env.Unsubscribe(x.self, v.SubscriptionID)
	switch {
	case err != nil:
		return Outcome{}, err
	case !known:
		return failed("unknown subscription: %s (you can remove only your own subscriptions)", v.SubscriptionID), nil
	}
	return done(tools.UnsubscribeResult()), nil
}

func (x exec) awaitInput(v tools.AwaitInput) (Outcome, error) {
	if x.pos.RunID == "" {
		return failed("await_input can only be called during a turn"), nil
	}
	return Outcome{}, x.env.AwaitInput(x.self, v, x.pos)
}
