package engine

import (
	"github.com/warren-dev/warren/session"
)

// facts reads the latest run's facts from the projection. The caller holds
// a.mu.
func (a *agent) facts() session.Facts {
	f := session.Facts{Corrupt: a.corrupt != nil, Terminated: a.p.Terminated}
	r := a.p.Run
	if r == nil {
		return f
	}
	f.RunID, f.RunBootID, f.RunEnded = r.RunID, r.BootID, r.Ended
	f.EarlierClaim = r.ClaimEpoch < a.p.ClaimEpoch
	f.Interrupted, f.InterruptReason = r.Interrupted, r.Reason
	if w := r.Wait; w != nil {
		f.Waiting = w.TokenState != tokConsumed
		f.WaitDeadline = w.Deadline
		switch w.TokenState {
		case tokLive:
			f.Token = session.TokenLive
		case tokConsumed:
			f.Token = session.TokenConsumed
		case tokRevoked:
			f.Token = session.TokenRevoked
		case tokExpired:
			f.Token = session.TokenExpired
		default:
			f.Token = session.TokenNone
		}
	}
	return f
}

// status is the agent's derived status (SPEC 4): session.json plus the log,
// through session.Derive, the one place the rules live.
func (c *Core) status(a *agent) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return c.statusLocked(a)
}

// statusLocked is status for a caller that holds a.mu.
func (c *Core) statusLocked(a *agent) string {
	st := session.Derive(a.snap.Get(), a.facts(), c.bootID, c.now())
	// A claimed agent whose turn.start is not written yet is already
	// running (a wake or resume has taken it).
	if a.busy && (st == session.StatusIdle || st == session.StatusInterruptedStartup || st == session.StatusInterruptedWaiting) {
		st = session.StatusRunning
	}
	return string(st)
}
