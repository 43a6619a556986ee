package engine

import (
	"time"

	"github.com/warren-dev/warren/engine/internal/notice"
	"github.com/warren-dev/warren/inbox"
	fold "github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/tree"
)

// An agent's reminders (the tools remind_me and cancel_reminder, SPEC 6):
// a reminder scheduled is logged (reminder.scheduled) and armed on a
// timer; when the timer fires, SYSTEM sends the agent a notification
// (notice.Reminder, metadata reminder_id) and a repeating reminder is
// armed again from the time of its last hit; a reminder cancelled is
// logged (reminder.cancelled) and disarmed. The reminders themselves are
// durable in the agent's log and folded into its projection (the fold
// records a hit when the notification is enqueued, and drops a reminder
// that does not repeat); recovery arms them again.
//
// The record's remMu, one per agent, serialises firing and cancelling
// that agent's reminders: fireReminder and cancelReminder hold it across
// their steps, the cancel's append included, so once cancelReminder
// returns no notice of the reminder is in flight (a firing that started
// finished first; one that had not started finds the reminder gone or its
// timer disarmed). It is taken outside every other lock of the engine.
// armReminder arms the timer inside agent.WithReminder, that is under the
// record's lock, so a cancel folded in between either finds the timer
// armed (and disarms it) or leaves nothing to arm.

// reminderTimer names reminder id's timer among its agent's timers.
func reminderTimer(id string) string { return "reminder:" + id }

// scheduleReminder logs reminder.scheduled for r in agent id's log and
// arms it; id must be a live agent (errNotFoundAgent).
func (c *Core) scheduleReminder(id string, r reminder) error {
	a, ok := c.agent(id)
	if !ok {
		return errNotFoundAgent
	}
	if _, err := a.Append(schema.ReminderSched, schema.ReminderData{ReminderID: r.ID, Reason: r.Reason,
		Due: r.Due.Format(time.RFC3339Nano), EveryMS: r.Every.Milliseconds()}); err != nil {
		return err
	}
	c.armReminder(a, r.ID)
	return nil
}

// armReminder starts the timer of a reminder recorded in a's projection:
// at its due time, or for a repeating reminder that fired already, one
// period after its last hit.
func (c *Core) armReminder(a *agent, id string) {
	a.WithReminder(id, func(r fold.Reminder) {
		next := r.Due
		if r.Every > 0 && !r.LastHit.IsZero() {
			next = r.LastHit.Add(r.Every)
		}
		c.sched.Arm(a.ID(), reminderTimer(id), next, func() { c.fireReminder(a, id) })
	})
}

// fireReminder delivers reminder id's SYSTEM notification to a, and arms
// a repeating reminder again. A reminder cancelled meanwhile, or an agent
// terminated, gets nothing; a failed delivery is logged and not re-armed.
func (c *Core) fireReminder(a *agent, id string) {
	a.remMu.Lock()
	defer a.remMu.Unlock()
	var reason string
	var every time.Duration
	known := false
	a.WithReminder(id, func(r fold.Reminder) { reason, every, known = r.Reason, r.Every, true })
	if !known || a.Terminated() {
		return
	}
	m := c.reminderNotice(newID(), a.ID(), id, reason, every)
	if err := c.enqueue(m); err != nil {
		c.log.Error("delivering a reminder", "agent", a.ID(), "reminder", id, "err", err)
		return
	}
	if every > 0 {
		c.armReminder(a, id)
	}
}

// reminderNotice is SYSTEM's notification of reminder id to agent.
func (c *Core) reminderNotice(msgID, agent, id, reason string, every time.Duration) inbox.Message {
	m := c.newMessage(msgID, tree.System, agent, inbox.KindNotification, notice.Reminder(id, reason, every))
	m.Metadata["reminder_id"] = id
	return m
}

// cancelReminder logs reminder.cancelled for reminder id in agent's log
// and disarms it, serialised with its firing; known is false (and
// nothing is logged) when agent is not a live agent or has no such
// reminder (unknown, or fired and not repeating).
func (c *Core) cancelReminder(agent, id string) (known bool, err error) {
	a, ok := c.agent(agent)
	if !ok {
		return false, nil
	}
	a.remMu.Lock()
	defer a.remMu.Unlock()
	a.WithReminder(id, func(fold.Reminder) { known = true })
	if !known {
		return false, nil
	}
	if _, err := a.Append(schema.ReminderCancel, schema.ReminderData{ReminderID: id}); err != nil {
		return true, err
	}
	c.sched.Cancel(a.ID(), reminderTimer(id))
	return true, nil
}
