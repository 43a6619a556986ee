package engine

import (
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/session"
)

// A log whose write failed (ENOSPC, EROFS, EMFILE, a failed fsync) refuses
// appends until it reopens itself (eventlog: "Faults and healing"). While
// it does, its agent is degraded: agent.list, agent.inspect and
// daemon.status show why, the state in memory stays what the log holds
// (an append that failed is not applied), and an operation that needs the
// log fails with code 6 and the cause. A run whose end (turn.complete,
// turn.failed, turn.cancelled) could not be logged stays open in the log;
// its end is owed: written as soon as the log accepts appends (when it
// heals, before the agent's next turn, or by agent cancel), after which the
// agent is idle.

// logHealed runs when a log accepts appends again: the agent's owed run
// end is written.
func (c *Core) logHealed(id string) {
	a, ok := c.agent(id)
	if !ok {
		return
	}
	c.goBackground(func() {
		if err := c.flushOwed(a); err != nil {
			c.log.Warn("writing the end of a run after the log healed", "agent", id, "err", err)
			return
		}
		c.wake(a)
	})
}

// flushIfHealed writes an end owed just now at once when the log has
// healed already: a cluster's log can heal (and run OnHeal) between the
// failed append and the Owe that records its end.
func (c *Core) flushIfHealed(a *agent) {
	if a.Log != nil && a.Log.Degraded() == nil {
		c.logHealed(a.ID())
	}
}

// flushOwed writes the agent's owed run end, if any; then the agent is
// idle in the log as it already is in fact. Concurrent callers write it
// once.
func (c *Core) flushOwed(a *agent) error {
	return a.WriteOwed(func() []eventlog.Record {
		return c.noticesFor(a, schema.StateBusy, schema.StateIdle, a.TransitionKey())
	}, func(runID, event string, logged bool) {
		if logged {
			c.log.Info("logged the end of a run after the log recovered", "agent", a.ID(), "run", runID, "event", event)
		} else {
			c.log.Info("the log recovered with the run already ended (or never started): nothing more to log", "agent", a.ID(), "run", runID)
		}
		c.saveSession(a, func(s *session.Session) {
			s.State = session.StateIdle
			s.Run = nil
		})
		c.notify(a) // busy -> idle
		c.changed.Fire()
	})
}

// DegradedCount is the number of agents whose log refuses appends or owes
// a run end.
func (c *Core) DegradedCount() int {
	n := 0
	for _, a := range c.agentList() {
		if a.Degraded() != "" {
			n++
		}
	}
	return n
}
