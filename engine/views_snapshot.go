package engine

import (
	"time"

	fold "github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/session"
)

// agentSnapshot is what the views read of one agent, copied by Take under the
// agent's lock: plain values, valid once the lock is released.
type agentSnapshot struct {
	ID, Name, ParentID string
	// Path is the agent's path in the tree ("" when it has none, as a
	// corrupt agent).
	Path                       string
	Provider, Model, LastError string
	Pending                    int
	Usage                      provider.Usage
	Spent                      fold.Spent
	// CreatedAt is when the agent was created; LastTurnAt when its latest
	// run started (zero: none).
	CreatedAt, LastTurnAt time.Time
	// Wait is the open run's wait, whatever its token's state (nil: no
	// open run, or one that does not wait); WaitSince is when it began.
	Wait      *WaitInfo
	WaitSince time.Time
	// Session is the agent's session.json snapshot as its status needs it
	// (nil: none, or not needed: the record (agent*.go) passes it only for an
	// open run). It is never changed: every change makes a new one.
	Session *session.Session
	// Facts are the latest run's facts from the log (Facts).
	Facts session.Facts
	// Busy: the agent is claimed by a turn, which may not have logged its
	// turn.start yet.
	Busy bool
	// Degraded says why the log refuses appends or which run end is owed
	// (Degraded; "" when neither).
	Degraded string
	// Corrupt is why the agent is listed corrupt (nil: it is not).
	Corrupt error
	// Unopened: Corrupt says the log could not be opened for lack of a
	// resource (a restart once the cause is gone is the fix, not repair).
	Unopened bool
}

// viewFlags is what Take reads beside the projection: the engine's state of
// the agent in this process, read under the same lock.
type viewFlags struct {
	ID, Path string
	Session  *session.Session
	Busy     bool
	Degraded string
	Corrupt  error
	Unopened bool
}

// Take copies the snapshot of an agent from its projection p and flags f.
// The caller guards p (the engine holds the agent's lock).
func takeSnapshot(p *fold.State, f viewFlags) agentSnapshot {
	s := agentSnapshot{ID: f.ID, Name: p.Name, ParentID: p.ParentID, Path: f.Path, Provider: p.Provider, Model: p.Model,
		LastError: p.LastError, Pending: p.Pending.Len(), Usage: p.Usage, Spent: p.Spent, CreatedAt: p.CreatedTS,
		Session: f.Session, Facts: viewFacts(p, f.Corrupt != nil), Busy: f.Busy, Degraded: f.Degraded, Corrupt: f.Corrupt,
		Unopened: f.Unopened}
	if r := p.Run; r != nil {
		s.LastTurnAt = r.StartedAt
		if !r.Ended && r.Wait != nil {
			s.Wait, s.WaitSince = waitOf(r.Wait, r.RunID), r.Wait.Since
		}
	}
	return s
}

// Facts reads the latest run's facts from the projection p, for
// session.Derive; corrupt says the agent is listed corrupt. The caller
// guards p.
func viewFacts(p *fold.State, corrupt bool) session.Facts {
	f := session.Facts{Corrupt: corrupt, Terminated: p.Terminated}
	r := p.Run
	if r == nil {
		return f
	}
	f.RunID, f.RunBootID, f.RunEnded = r.RunID, r.BootID, r.Ended
	f.EarlierClaim = r.ClaimEpoch < p.ClaimEpoch
	f.Interrupted, f.InterruptReason = r.Interrupted, r.Reason
	if w := r.Wait; w != nil {
		// Waiting until a run.resumed ends the wait: one that consumes
		// the token, or one after the wait timed out (r.TimedOut, which
		// the next run.waiting clears).
		f.Waiting = w.TokenState != string(schema.TokConsumed) && !r.TimedOut
		f.WaitDeadline = w.Deadline
		switch schema.TokenState(w.TokenState) {
		case schema.TokLive:
			f.Token = session.TokenLive
		case schema.TokConsumed:
			f.Token = session.TokenConsumed
		case schema.TokRevoked:
			f.Token = session.TokenRevoked
		case schema.TokExpired:
			f.Token = session.TokenExpired
		default:
			f.Token = session.TokenNone
		}
	}
	return f
}

// Status is an agent's derived status (SPEC 4): session.json s plus the
// log's facts f, through session.Derive, the one place the rules live. A
// busy agent (claimed by a turn whose turn.start is not written yet) that
// would be idle or interrupted is already running.
func viewStatus(s *session.Session, f session.Facts, busy bool, bootID string, now time.Time) string {
	st := session.Derive(s, f, bootID, now)
	if busy && (st == session.StatusIdle || st == session.StatusInterruptedStartup || st == session.StatusInterruptedWaiting) {
		st = session.StatusRunning
	}
	return string(st)
}

// WaitOf is the wait w of run runID as a turn's result and the agent
// views show it.
func waitOf(w *fold.Wait, runID string) *WaitInfo {
	return &WaitInfo{RunID: runID, Kind: w.Kind, Prompt: w.Prompt, TokenID: w.TokenID, Deadline: w.Deadline, State: w.TokenState}
}
