package engine

import (
	"context"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/inbox"
	fold "github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/store"
	"sync"
	"sync/atomic"
)

// agent is one live agent. Durable state lives in p (the projection of its
// log); the rest is the state of this process only.
type agent struct {
	id string
	// Log is the agent's event log; nil for an agent listed corrupt
	// without one. Set by newAgent, never changed.
	Log store.Log

	// Ckpt is the agent's checkpoint bookkeeping (its own locks).
	Ckpt ckptState
	// Snap is the session.json snapshot and its write-behind
	// (snapshots.go, with its own locks).
	Snap sessionSnap

	remMu sync.Mutex // serialises firing and cancelling reminders (reminders.go)
	// owed is the end of the open run that could not be logged (owed.go,
	// its flush lock and an atomic).
	owed owedEnd
	// resumes are the secrets minted in its runs until handed out and
	// the results a repeated resume shares (resume.go, a leaf lock).
	resumes resumes

	// stateMu guards p and the fields below it; only the record's methods
	// (the agent*.go files) take it (TestOnlyTheRecordTakesItsLock).
	stateMu sync.Mutex
	p       *fold.State
	// cursors remember where the next agent.log pages start (logpage.go).
	cursors logCursors

	busy       bool         // a turn is running or being started
	claims     uint64       // how many times busy was set (quiet)
	cur        *runningTurn // the running turn
	permit     bool         // permit_turn: one turn while gated
	deferred   []func()     // work after the current turn ends
	spawns     spawnQueue   // children spawned in the current turn
	completing bool         // complete was called: terminate after the turn
	// held: the last turn failed; no automatic wake on the same messages
	// until a poke, a new message or a successful turn.
	held bool
	// settling: a turn ended (busy is false) and its aftermath still runs:
	// deferred spawns, notices to subscribers and the parent, completion,
	// the next wake (turn.go). Quiescence means no agent busy or
	// settling.
	settling bool
	// untold are the notices.owed this process logged and has not
	// delivered yet; noticesTaken is the seq of the latest taken
	// (TakeNotices).
	untold       []fold.Notices
	noticesTaken uint64
	// terminating is set (under the roster's lock, not mu) when
	// termination removes the agent; subscriptions to it are refused from
	// then on.
	terminating bool
	corrupt     error // the log is damaged in the middle
	// released: this daemon may no longer write for the agent (its log
	// was fenced or its lease lost); no turn starts again.
	released error
	// blocked: the agent cannot run (its workspace could not be repaired
	// at recovery, or its sandbox cannot be made): its status says why and
	// it takes no turn, never outside its workspace or sandbox.
	blocked error
}

// ckptState is an agent's checkpoint bookkeeping.
type ckptState struct {
	// Mu serialises the agent's checkpoint writes (taken before the
	// record's lock).
	Mu sync.Mutex
	// Seq is the seq of the last checkpoint written or recovered from
	// (stored under Mu, read anywhere).
	Seq atomic.Uint64
	// Armed: a checkpoint timer is armed for the agent.
	Armed atomic.Bool
}

// runningTurn is the turn an agent is running.
type runningTurn struct {
	runID  string
	rerun  bool
	cancel context.CancelCauseFunc // with why (errStopping, errOperatorCancel, a release)
	done   chan struct{}
	// tools is the ToolCaller of the attempt in progress (nil between
	// attempts): calls made with the agent's credential join it.
	tools *runTools
	// awayOn is the worker whose copy of the workspace the attempt in
	// progress works in ("": the daemon's worktree, or none).
	awayOn string
}

// End says the turn's work is over: whoever waits for the running turn
// to stop may go on.
func (t *runningTurn) End() { close(t.done) }

// newAgent makes the record of agent id with its log and the projection
// folded from it.
func newAgent(id string, log store.Log, p *fold.State) *agent {
	return &agent{id: id, Log: log, p: p}
}

// ID is the agent's id.
func (a *agent) ID() string { return a.id }

// Name is the agent's name.
func (a *agent) Name() string {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	return a.p.Name
}

// Terminated reports whether the log records the agent's termination.
func (a *agent) Terminated() bool {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	return a.p.Terminated
}

// Corrupt is why the agent's log cannot be used (nil when it can).
func (a *agent) Corrupt() error {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	return a.corrupt
}

// MarkCorrupt lists the agent corrupt with err, unless it already is.
func (a *agent) MarkCorrupt(err error) {
	a.stateMu.Lock()
	if a.corrupt == nil {
		a.corrupt = err
	}
	a.stateMu.Unlock()
}

// Block records why the agent cannot run until the daemon restarts: its
// workspace could not be repaired, or its sandbox cannot be made.
func (a *agent) Block(err error) {
	a.stateMu.Lock()
	if a.blocked == nil {
		a.blocked = err
	}
	a.stateMu.Unlock()
}

// SetTerminating marks the agent as being removed by its termination;
// Terminating reads the mark. The caller holds the lock of the engine's
// table of agents (roster.go), which guards it.
func (a *agent) SetTerminating()   { a.terminating = true }
func (a *agent) Terminating() bool { return a.terminating }

// Append and AppendBatch write to the agent's log (store.Log's); the
// commit folds the entries into the projection before they return.
func (a *agent) Append(event string, data any) (eventlog.Entry, error) {
	return a.Log.Append(event, data)
}
func (a *agent) AppendBatch(recs []eventlog.Record) ([]eventlog.Entry, error) {
	return a.Log.AppendBatch(recs)
}

// CloseLog closes the agent's log.
func (a *agent) CloseLog() error { return a.Log.Close() }

// LastSeq is the seq of the agent's last logged entry; false for an agent
// listed corrupt, which has no log.
func (a *agent) LastSeq() (uint64, bool) {
	if a.Log == nil {
		return 0, false
	}
	return a.Log.LastSeq(), true
}

// Resumes are the agent's resume secrets and shared results.
func (a *agent) Resumes() *resumes { return &a.resumes }

// CountIn counts the agent's pending messages in totals (nil: in none).
// The projection is not shared yet (a new or recovered agent) or no
// longer (a terminated one): no lock.
func (a *agent) CountIn(totals *inbox.Totals) { a.p.Pending.Attach(totals) }

// Detach stops counting the agent's pending messages in the engine's
// totals.
func (a *agent) Detach() { a.CountIn(nil) }

// ApplyCommitted folds entries of the agent's log into its projection.
// The log calls it, in seq order, once the entries are durable; a fold
// error is reported through onErr for the entry. It reports whether the
// log has grown enough for a checkpoint: by any entry while the agent is
// at rest, by every entries since its last checkpoint while it runs a
// turn (never when every is 0 or less: checkpoints are off).
func (a *agent) ApplyCommitted(es []eventlog.Entry, every int, onErr func(eventlog.Entry, error)) (checkpointDue bool) {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	for _, e := range es {
		if err := a.p.Apply(e); err != nil {
			onErr(e, err)
		} else if e.Event == schema.NoticesOwed && a.p.Notices != nil {
			a.untold = append(a.untold, *a.p.Notices)
		}
	}
	if every <= 0 { // no checkpoints
		return false
	}
	return !a.busy || a.p.LastSeq >= a.Ckpt.Seq.Load()+uint64(every)
}

// liveFlags is a copy of the agent's live flags.
type liveFlags struct {
	Busy, Running, Permit, Completing, Held, Settling bool
	Corrupt, Released                                 error
}

// View calls f with the agent's projection and live flags under its lock,
// for a read no method above makes; f calls nothing that may take another
// lock (and changes the projection only in a test).
func (a *agent) View(f func(p *fold.State, l liveFlags)) {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	f(a.p, liveFlags{Busy: a.busy, Running: a.cur != nil, Permit: a.permit, Completing: a.completing, Held: a.held,
		Settling: a.settling, Corrupt: a.corrupt, Released: a.released})
}

// The agent's durable state is folded by package projection (no locks, no
// I/O); the record holds one under its lock. Short names for its types:
type (
	projection      = fold.State
	recordedCall    = fold.Call
	sentRef         = fold.SentRef
	subscriptionRec = fold.Subscription
)

// residentPayload is the largest payload a pending message keeps in memory.
const residentPayload = fold.ResidentPayload

func newProjection() *projection { return fold.New() }

// CursorOff is the offset of line seq of the log, if an agent.log page
// ended before it (0: unknown).
func (a *agent) CursorOff(seq uint64) int64 {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	return a.cursors.Off(seq)
}

// RememberCursor records that the next agent.log page starts at seq, at
// byte off.
func (a *agent) RememberCursor(seq uint64, off int64) {
	a.stateMu.Lock()
	a.cursors.remember(seq, off)
	a.stateMu.Unlock()
}
