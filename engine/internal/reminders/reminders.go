// Package reminders runs an agent's reminders (the tools remind_me and
// cancel_reminder, SPEC 6): a reminder scheduled is logged
// (reminder.scheduled) and armed on a timer; when the timer fires, SYSTEM
// sends the agent a notification (notice.Reminder, metadata reminder_id)
// and a repeating reminder is armed again from the time of its last hit;
// a reminder cancelled is logged (reminder.cancelled) and disarmed. The
// reminders themselves are durable in the agent's log and folded into its
// projection (the fold records a hit when the notification is enqueued,
// and drops a reminder that does not repeat); the engine arms them again
// at recovery.
//
// What the steps do to the agent and the engine goes through Env: the
// projection read under the agent's lock, the log, the timers, the clock
// and the enqueue.
//
// # Locks
//
// Timers, one per agent, serialises firing and cancelling that agent's
// reminders: Fire and Cancel hold its mutex across their steps, the
// cancel's append included, so once Cancel returns no notice of the
// reminder is in flight (a firing that started finished first; one that
// had not started finds the reminder gone or its timer disarmed). It is
// taken outside every lock of the engine (Env's and Agent's methods take
// theirs one after the other inside it). Arm calls Env.Arm inside
// Agent.WithReminder, that is under the agent's lock, so a cancel folded
// in between either finds the timer armed (and disarms it) or leaves
// nothing to arm.
package reminders

import (
	"sync"
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

// Agent is what the reminders need of an agent: the engine's record of
// it (agentrec.Agent), each method taking its lock itself.
type Agent interface {
	ID() string
	// Timers serialise firing and cancelling its reminders.
	Timers() *Timers
	// WithReminder calls f with its reminder id under its lock; it does
	// nothing when it has no such reminder.
	WithReminder(id string, f func(r projection.Reminder))
	// Terminated reports whether it is terminated.
	Terminated() bool
	// Append logs one entry in its log (store.Log's Append).
	Append(event string, data any) (eventlog.Entry, error)
}

// Env is what the reminders need of the engine, for agents of type A.
type Env[A Agent] interface {
	// Agent returns a live agent.
	Agent(id string) (A, bool)
	// Arm starts (or restarts) a's timer name at t to call fire; Disarm
	// cancels it: once Disarm returns, fire does not start.
	Arm(a A, name string, t time.Time, fire func())
	Disarm(a A, name string)
	// Now is the clock; NewID a fresh random message id.
	Now() time.Time
	NewID() string
	// Enqueue makes m durable in its recipient's inbox (after its checks).
	Enqueue(m inbox.Message) error
	Logger() hclog.Logger
}

// Timer names reminder id's timer among its agent's timers.
func Timer(id string) string { return "reminder:" + id }

// Timers serialises firing and cancelling one agent's reminders. The zero
// value is ready.
type Timers struct{ mu sync.Mutex }

// Schedule logs reminder.scheduled for r in agent id's log and arms it;
// id must be a live agent (toolexec.ErrNoAgent).
func Schedule[A Agent](env Env[A], id string, r toolexec.Reminder) error {
	a, ok := env.Agent(id)
	if !ok {
		return toolexec.ErrNoAgent
	}
	if _, err := a.Append(schema.ReminderSched, schema.ReminderData{ReminderID: r.ID, Reason: r.Reason,
		Due: r.Due.Format(time.RFC3339Nano), EveryMS: r.Every.Milliseconds()}); err != nil {
		return err
	}
	Arm(env, a, r.ID)
	return nil
}

// Arm starts the timer of a reminder recorded in a's projection: at its
// due time, or for a repeating reminder that fired already, one period
// after its last hit.
func Arm[A Agent](env Env[A], a A, id string) {
	a.WithReminder(id, func(r projection.Reminder) {
		next := r.Due
		if r.Every > 0 && !r.LastHit.IsZero() {
			next = r.LastHit.Add(r.Every)
		}
		env.Arm(a, Timer(id), next, func() { Fire(env, a, id) })
	})
}

// Fire delivers reminder id's SYSTEM notification to a, and arms a
// repeating reminder again. A reminder cancelled meanwhile, or an agent
// terminated, gets nothing; a failed delivery is logged and not re-armed.
func Fire[A Agent](env Env[A], a A, id string) {
	t := a.Timers()
	t.mu.Lock()
	defer t.mu.Unlock()
	var reason string
	var every time.Duration
	known := false
	a.WithReminder(id, func(r projection.Reminder) { reason, every, known = r.Reason, r.Every, true })
	if !known || a.Terminated() {
		return
	}
	m := Notice(env, env.NewID(), a.ID(), id, reason, every)
	if err := env.Enqueue(m); err != nil {
		env.Logger().Error("delivering a reminder", "agent", a.ID(), "reminder", id, "err", err)
		return
	}
	if every > 0 {
		Arm(env, a, id)
	}
}

// Notice is SYSTEM's notification of reminder id to agent, stamped with
// clock's time.
func Notice(clock interface{ Now() time.Time }, msgID, agent, id, reason string, every time.Duration) inbox.Message {
	m := toolexec.NewMessage(clock, msgID, tree.System, agent, inbox.KindNotification, notice.Reminder(id, reason, every))
	m.Metadata["reminder_id"] = id
	return m
}

// Cancel logs reminder.cancelled for reminder id in agent's log and
// disarms it, serialised with its firing; known is false (and nothing is
// logged) when agent is not a live agent or has no such reminder
// (unknown, or fired and not repeating).
func Cancel[A Agent](env Env[A], agent, id string) (known bool, err error) {
	a, ok := env.Agent(agent)
	if !ok {
		return false, nil
	}
	t := a.Timers()
	t.mu.Lock()
	defer t.mu.Unlock()
	a.WithReminder(id, func(projection.Reminder) { known = true })
	if !known {
		return false, nil
	}
	if _, err := a.Append(schema.ReminderCancel, schema.ReminderData{ReminderID: id}); err != nil {
		return true, err
	}
	env.Disarm(a, Timer(id))
	return true, nil
}
