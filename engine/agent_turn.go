package engine

import (
	"context"
	"errors"
	fold "github.com/warren-dev/warren/projection"

	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/schema"
)

// The turn's life on the record: claimed (busy), begun (cur), at rest
// (settling until its aftermath is done), and what decides a wake.

// Claim marks the agent busy for a turn; it fails when the agent cannot
// run one now.
func (a *agent) Claim() error {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	switch {
	case a.corrupt != nil:
		if errors.Is(a.corrupt, errUnopened) {
			return failf(ErrUnavailable, "agent %s: %w", a.id, a.corrupt)
		}
		return failf(ErrWrongState, "agent %s has a damaged log: %w; run `warren repair %s`", a.id, a.corrupt, a.id)
	case a.p.Terminated:
		return failf(ErrWrongState, "agent %s (%s) is terminated", a.p.Name, a.id)
	case a.released != nil:
		return failf(ErrUnavailable, "agent %s (%s) is no longer run by this daemon: %v", a.p.Name, a.id, a.released)
	case a.busy:
		return failf(ErrWrongState, "agent %s (%s) is mid-turn; wait for it or cancel it (warren agent cancel)", a.p.Name, a.id)
	case a.blocked != nil:
		return failf(ErrWrongState, "agent %s (%s) cannot run: %v (fix that, then restart the daemon: the start checks workspaces and sandboxes again)", a.p.Name, a.id, a.blocked)
	}
	a.busy, a.claims = true, a.claims+1
	return nil
}

// Unclaim undoes a claim and nothing else.
func (a *agent) Unclaim() {
	a.stateMu.Lock()
	a.busy = false
	a.stateMu.Unlock()
}

// TakeWake claims the agent for a wake turn when it should take one: it
// is idle, has pending messages, is not held after a failure (clearHold
// lifts that: a poke), its log accepts appends, its gate (or a permit)
// lets it run, it waits on nothing, has no interrupted run to re-run
// first and is not completing. It returns the
// first pending messages (at most max, about bytes of payload), the
// permit used.
func (a *agent) TakeWake(clearHold bool, max int, bytes int64) ([]inbox.Message, bool) {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	if clearHold {
		a.held = false
	}
	// A log that refuses appends wakes the agent when it heals.
	if a.held || a.busy || a.p.Terminated || a.corrupt != nil || a.released != nil || a.p.Pending.Len() == 0 ||
		(a.Log != nil && a.Log.Degraded() != nil) ||
		(a.p.Gated && !a.permit) || a.hasLiveWait() || a.hasInterruptedRun() || a.completing || a.blocked != nil {
		return nil, false
	}
	msgs := a.p.Pending.PeekFirst(max, bytes)
	a.busy, a.claims = true, a.claims+1
	a.permit = false
	return msgs, true
}

// activity reports whether a turn runs (or its aftermath), or, unless
// noWake, a wake is due, and the number of turns claimed on the record so
// far, read together (quiet).
func (a *agent) activity(noWake bool) (active bool, claims uint64) {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	return a.busy || a.settling || (!noWake && a.p.Pending.Len() > 0 && !a.p.Gated && !a.hasLiveWait() && !a.hasInterruptedRun() &&
		a.corrupt == nil && !a.held), a.claims
}

// quiet reports whether none of the agents list returns is active (no
// turn, no aftermath, unless noWake no wake due) at one moment. Reading
// each agent once is not enough: an agent read at rest can be woken a
// moment later by one read after it, whose aftermath (a notice to a
// subscriber, a message) ended before its own read, so that every read
// says "at rest" while a turn runs. quiet reads every agent twice, and
// the agents and each one's count of claimed turns must be the same both
// times: a turn claimed between an agent's two reads changes its count,
// and one claimed before its first read or after its second needs a cause
// active after every first read and before every second, which the second
// reads would have seen. (Work started by a timer of the scheduler is not
// an agent's, and is not covered.)
func quiet(list func() []*agent, noWake bool) bool {
	first := map[*agent]uint64{}
	for _, a := range list() {
		active, claims := a.activity(noWake)
		if active {
			return false
		}
		first[a] = claims
	}
	second := list()
	if len(second) != len(first) {
		return false
	}
	for _, a := range second {
		active, claims := a.activity(noWake)
		if c, ok := first[a]; active || !ok || c != claims {
			return false
		}
	}
	return true
}

// Gated reports whether the agent's gate holds it (no permit granted).
func (a *agent) Gated() bool {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	return a.p.Gated && !a.permit
}

// SetPermit grants or withdraws the agent's permit of one turn.
func (a *agent) SetPermit(permit bool) {
	a.stateMu.Lock()
	a.permit = permit
	a.stateMu.Unlock()
}

// StartTurn makes a new turn the running one, chosen by chooseTurn
// from the agent's settings (cancel stops it), and returns why this
// daemon may no longer run the agent (nil when it may), read in the same
// critical section.
func (a *agent) StartTurn(req TurnRequest, cancel context.CancelCauseFunc, defaultModel func(string) string,
	newID func() string) (turnPlan, *runningTurn, error) {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	tr := chooseTurn(req, a.p.Provider, a.p.Model, a.p.TurnNo,
		defaultModel, newID)
	a.cur = &runningTurn{runID: tr.RunID, rerun: tr.Rerun, cancel: cancel, done: make(chan struct{})}
	return tr, a.cur, a.released
}

// StartsRun reports whether the running turn starts run runID afresh
// (not a re-run of it).
func (a *agent) StartsRun(runID string) bool {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	return a.cur != nil && !a.cur.rerun && a.cur.runID == runID
}

// CancelTurn cancels the running turn, if any, with cause (the turn's
// end reads it: errStopping interrupts the run, anything else cancels
// it).
func (a *agent) CancelTurn(cause error) {
	a.stateMu.Lock()
	cur := a.cur
	a.stateMu.Unlock()
	if cur != nil {
		cur.cancel(cause)
	}
}

// MarkReleased records that this daemon may no longer write for the agent
// (first: it had not been released yet) and returns the running turn's
// cancel (nil when none runs).
func (a *agent) MarkReleased(cause error) (first bool, cancel context.CancelCauseFunc) {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	if a.released != nil {
		return false, nil
	}
	a.released = cause
	if a.cur != nil {
		cancel = a.cur.cancel
	}
	return true, cancel
}

// setTurnTools publishes (or, with nil, withdraws) the ToolCaller of the
// attempt in progress of run runID.
func (a *agent) setTurnTools(runID string, t *runTools) {
	a.stateMu.Lock()
	if a.cur != nil && a.cur.runID == runID {
		a.cur.tools = t
	}
	a.stateMu.Unlock()
}

// setAway publishes (or, with "", withdraws) the worker whose copy of
// the workspace the attempt in progress of run runID works in.
func (a *agent) setAway(runID, worker string) {
	a.stateMu.Lock()
	if a.cur != nil && a.cur.runID == runID {
		a.cur.awayOn = worker
	}
	a.stateMu.Unlock()
}

// AwayOn is the worker whose copy of the workspace the running turn's
// attempt works in ("": none).
func (a *agent) AwayOn() string {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	if a.cur == nil {
		return ""
	}
	return a.cur.awayOn
}

// TurnTools is the ToolCaller of the running turn's attempt (nil between
// attempts and turns), with the agent's name.
func (a *agent) TurnTools() (t *runTools, name string) {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	if a.cur != nil {
		t = a.cur.tools
	}
	return t, a.p.Name
}

// Rest ends the running turn: not busy, settling (held after a failure);
// it takes the work deferred during the turn and whether the agent
// completes.
func (a *agent) Rest(held bool) (deferred []func(), completing bool) {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	a.cur = nil
	a.busy = false
	a.settling = true
	a.held = held
	deferred = a.deferred
	a.deferred = nil
	return deferred, a.completing
}

// Settled: the aftermath of the turn is done.
func (a *agent) Settled() {
	a.stateMu.Lock()
	a.settling = false
	a.stateMu.Unlock()
}

// Defer queues spec as a child to spawn after the running turn, running
// later then (spawnQueue.Defer).
func (a *agent) Defer(spec CreateSpec, later func()) (ok, now bool) {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	ok, queued, now := a.spawns.Defer(spec, a.busy)
	if queued {
		a.deferred = append(a.deferred, later)
	}
	return ok, now
}

// Spawned takes child id off the spawn queue.
func (a *agent) Spawned(id string) {
	a.stateMu.Lock()
	a.spawns.Done(id)
	a.stateMu.Unlock()
}

// Completing marks the agent to be terminated after its turn and reports
// whether it runs one.
func (a *agent) Completing() (inTurn bool) {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	a.completing = a.busy
	return a.busy
}

// State is the agent's state as tools and subscriptions see it.
func (a *agent) State() string {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	return a.stateLocked()
}

func (a *agent) stateLocked() string {
	switch {
	case a.p.Terminated:
		return schema.StateTerminated
	case a.busy:
		return schema.StateBusy
	case a.hasLiveWait():
		return schema.StateWaiting
	}
	return schema.StateIdle
}

// HasLiveWait reports whether the agent's latest run waits on a live
// token.
func (a *agent) HasLiveWait() bool {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	return a.hasLiveWait()
}

// hasInterruptedRun: the agent's latest run was interrupted and is not
// re-run yet: it takes no wake turn, so that the messages the run took
// stay its own (SPEC 4).
func (a *agent) hasInterruptedRun() bool { return interrupted(*runOrZero(a.p.Run)) }

// runOrZero is r, or a zero run for nil.
func runOrZero(r *fold.Run) *fold.Run {
	if r == nil {
		return &fold.Run{}
	}
	return r
}

func (a *agent) hasLiveWait() bool {
	r := a.p.Run
	return r != nil && !r.Ended && r.Wait != nil && r.Wait.TokenState == string(schema.TokLive)
}
