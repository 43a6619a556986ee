package session

import (
	"time"

	"github.com/warren-dev/warren/schema"
)

// Status is a derived agent status (SPEC 4). It is never stored as the
// authority; Derive computes it.
type Status string

// Derived statuses.
const (
	StatusInterruptedStartup Status = "interrupted_startup"
	StatusInterruptedWaiting Status = "interrupted_waiting"
	StatusSuspended          Status = "suspended"
	StatusRunning            Status = "running"
	StatusIdle               Status = "idle"
	StatusTerminated         Status = "terminated"
	StatusCorrupt            Status = "corrupt"
)

// Statuses lists every Status (kept for tests, which range over them).
func Statuses() []Status {
	return []Status{StatusCorrupt, StatusTerminated, StatusInterruptedStartup, StatusInterruptedWaiting,
		StatusSuspended, StatusRunning, StatusIdle}
}

// TokenState is the state of the latest run's resume token as the log tells
// it.
type TokenState string

// Token states. The zero value means the same as TokenNone.
const (
	TokenNone     TokenState = "none"                     // no token minted for the current wait
	TokenLive     TokenState = TokenState(schema.TokLive) // minted, not consumed, revoked or expired
	TokenConsumed TokenState = TokenState(schema.TokConsumed)
	TokenRevoked  TokenState = TokenState(schema.TokRevoked)
	TokenExpired  TokenState = TokenState(schema.TokExpired)
)

// Interruption reasons of run.interrupted.
const (
	ReasonProcessRestart = schema.ReasonProcessRestart
	ReasonWaitTimeout    = schema.ReasonWaitTimeout
)

// Facts describes an agent's latest run as read from its event log.
type Facts struct {
	// Corrupt: the log is damaged in the middle (not a torn tail).
	Corrupt bool
	// Terminated: agent.terminated is logged.
	Terminated bool
	// RunID is the latest run (from turn.start); "" when there is none.
	RunID string
	// RunBootID is the boot the run last started a turn or was resumed
	// under; "" when the log does not say.
	RunBootID string
	// EarlierClaim: the log holds an agent.claimed after the run's latest
	// turn.start, with a greater epoch than the claim that turn began
	// under (a cluster store: the agent was claimed again since). Never
	// set on the local store, which writes no claims.
	EarlierClaim bool
	// RunEnded: turn.complete, turn.failed or turn.cancelled is logged for
	// the run's latest turn, or a newer run superseded it.
	RunEnded bool
	// Interrupted: run.interrupted is logged for the run; InterruptReason is
	// the reason of the latest one.
	Interrupted     bool
	InterruptReason string
	// Resumed: run.resumed follows the latest run.interrupted of the run
	// (the interruption is cleared).
	Resumed bool
	// Waiting: the run's latest run.waiting has no later run.resumed.
	Waiting bool
	// Token is the state of the current wait's token.
	Token TokenState
	// WaitDeadline is the current wait's deadline; zero means none (or
	// unknown: the snapshot's is used then).
	WaitDeadline time.Time
}

// Derive computes the status from the snapshot s (may be nil), the log facts
// f, the current boot id and the current time. The rules are in the package
// documentation.
func Derive(s *Session, f Facts, bootID string, now time.Time) Status {
	if f.Corrupt {
		return StatusCorrupt
	}
	if terminated(s, f) {
		return StatusTerminated
	}
	if f.RunID == "" || f.RunEnded {
		return StatusIdle
	}
	return deriveOpen(f, sameRun(s, f), bootID, now)
}

// deriveOpen is Derive for an open run; snap is the snapshot of the same
// run (nil: none).
func deriveOpen(f Facts, snap *Run, bootID string, now time.Time) Status {
	deadline := waitDeadline(f, snap)
	earlierBoot := startedEarlier(f, snap, bootID)
	pending := f.pendingInterrupt()
	restartInt := pending && f.InterruptReason != ReasonWaitTimeout
	timeoutInt := pending && f.InterruptReason == ReasonWaitTimeout
	overdue := !deadline.IsZero() && !now.Before(deadline)

	switch {
	case restartInt || (earlierBoot && !f.Waiting):
		return StatusInterruptedStartup
	case timeoutInt || (f.Waiting && (f.Token != TokenLive || overdue)):
		return StatusInterruptedWaiting
	case f.Waiting:
		return StatusSuspended
	default:
		return StatusRunning
	}
}

// terminated: the log or the snapshot says the agent is terminated.
func terminated(s *Session, f Facts) bool {
	return f.Terminated || (s != nil && s.State == StateTerminated)
}

// sameRun is the snapshot's run when it is the facts' run, else nil.
func sameRun(s *Session, f Facts) *Run {
	if s != nil && s.Run != nil && s.Run.RunID == f.RunID {
		return s.Run
	}
	return nil
}

// runBoot is the boot of the facts' run: the log's, else the snapshot's
// (snap: the snapshot of the same run, or nil).
func runBoot(f Facts, snap *Run) string {
	if f.RunBootID == "" && snap != nil {
		return snap.BootID
	}
	return f.RunBootID
}

// startedEarlier: the run began (or last resumed) under another boot than
// bootID, under an unknown one, or under an earlier claim of the agent
// (f.EarlierClaim: another daemon of a cluster owned it since).
func startedEarlier(f Facts, snap *Run, bootID string) bool {
	boot := runBoot(f, snap)
	return boot == "" || boot != bootID || f.EarlierClaim
}

// waitDeadline is the current wait's deadline: the log's, else the
// snapshot's (snap: the snapshot of the same run, or nil).
func waitDeadline(f Facts, snap *Run) time.Time {
	if f.WaitDeadline.IsZero() && snap != nil && snap.Wait != nil {
		return snap.Wait.Deadline
	}
	return f.WaitDeadline
}

// pendingInterrupt: the run's latest run.interrupted is not followed by a
// run.resumed.
func (f Facts) pendingInterrupt() bool { return f.Interrupted && !f.Resumed }

// NeedsRestartMark reports whether recovery must append run.interrupted
// (process_restart) for the facts' run: it is open, was not waiting, began
// under an earlier boot or an earlier claim (f.EarlierClaim) and carries
// no pending interruption yet. Appending
// the mark once and re-deriving facts makes this false, so recovery run
// twice appends one mark.
func NeedsRestartMark(s *Session, f Facts, bootID string) bool {
	if f.Corrupt || terminated(s, f) || f.RunID == "" || f.RunEnded || f.Waiting || f.pendingInterrupt() {
		return false
	}
	return startedEarlier(f, sameRun(s, f), bootID)
}

// NeedsWaitTimeout reports whether the deadline sweep must expire the
// facts' wait (token.expired and run.interrupted with wait_timeout): the run
// is open and waiting, no interruption is pending, and the deadline (from
// the facts, else the snapshot of the same run) has passed at now. Kept
// for tests: it states the sweep's rule in terms of facts, and the Derive
// tests hold Derive to it; the daemon's sweep expires waits by their
// tokens (token.Service.Expire).
func NeedsWaitTimeout(s *Session, f Facts, now time.Time) bool {
	if f.Corrupt || terminated(s, f) || f.RunID == "" || f.RunEnded || !f.Waiting || f.pendingInterrupt() {
		return false
	}
	deadline := waitDeadline(f, sameRun(s, f))
	return !deadline.IsZero() && !now.Before(deadline)
}
