package engine

// The core's timers run on its scheduler (c.sched, package schedule), on
// the clock CoreOptions.Clock gives. Timers an agent owns are armed under
// its id, so that terminating it cancels them (CancelOwner); the core's own
// are armed under the empty owner. Wait deadlines are anonymous: a sweep
// that finds nothing to expire is harmless.

// sweepTimer names the periodic sweep (SweepEvery) under the empty owner.
const sweepTimer = "sweep"

// reminderTimer names a reminder's timer under its agent's id.
func reminderTimer(id string) string { return "reminder:" + id }

// disarmReminder cancels a reminder's timer; once it returns, the timer's
// callback does not start (one that started holds a.remMu, which
// cancel_reminder takes too).
func (c *Core) disarmReminder(a *agent, id string) { c.sched.Cancel(a.id, reminderTimer(id)) }
