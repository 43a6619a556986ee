package engine

// The core's timers run on its scheduler (c.sched, package schedule), on
// the clock CoreOptions.Clock gives. Timers an agent owns are armed under
// its id, so that terminating it cancels them (CancelOwner); the core's own
// are armed under the empty owner. Wait deadlines are anonymous: a sweep
// that finds nothing to expire is harmless. Reminders name their timers
// (reminders.Timer).

// sweepTimer names the periodic sweep (SweepEvery) under the empty owner.
const sweepTimer = "sweep"
