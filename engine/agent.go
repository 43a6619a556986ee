package engine

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/warren-dev/warren/engine/internal/lifecycle"
	"github.com/warren-dev/warren/engine/internal/logpage"
	"github.com/warren-dev/warren/engine/internal/owed"
	"github.com/warren-dev/warren/engine/internal/reminders"
	"github.com/warren-dev/warren/engine/internal/snapsave"
	"github.com/warren-dev/warren/engine/internal/waits"
	"github.com/warren-dev/warren/store"

	"github.com/warren-dev/warren/eventlog"
)

// agent is one live agent. Durable state lives in p (the projection of its
// log); the rest is the state of this process only.
type agent struct {
	id  string
	log store.Log

	ckptMu sync.Mutex // serialises checkpoint writes
	// ckptSeq is the seq of the last checkpoint written or recovered from
	// (stored under ckptMu, read anywhere).
	ckptSeq atomic.Uint64
	// ckptArmed: a checkpoint timer is armed for the agent (checkpointSoon).
	ckptArmed atomic.Bool
	remMu     reminders.Timers // serialises firing and cancelling reminders
	mu        sync.Mutex
	p         *projection
	// snap is the session.json snapshot and its write-behind (package
	// snapsave, with its own locks).
	snap snapsave.Snapshot

	busy       bool             // a turn is running or being started
	cur        *activeTurn      // the running turn
	permit     bool             // permit_turn: one turn while gated
	deferred   []func()         // work after the current turn ends
	spawns     lifecycle.Spawns // children spawned in the current turn
	completing bool             // complete was called: terminate after the turn
	// held: the last turn failed; no automatic wake on the same messages
	// until a poke, a new message or a successful turn.
	held bool
	// settling: a turn ended (busy is false) and its aftermath still runs:
	// deferred spawns, notices to subscribers and the parent, completion,
	// the next wake (package turnrun). Quiescence means no agent busy or settling.
	settling bool
	// terminating is set (under the core lock) when termination removes
	// the agent; subscriptions to it are refused from then on.
	terminating bool
	corrupt     error // the log is damaged in the middle
	// released: this daemon may no longer write for the agent (its log
	// was fenced or its lease lost, store.go); no turn starts again.
	released error
	// owed is the end of the open run that could not be logged (package
	// owed, with its own locks; degraded.go).
	owed owed.End
	// resumes are the secrets minted in its runs until handed out and
	// the results a repeated resume shares (package waits, its own lock).
	resumes waits.Resumes[TurnResult]
	// cursors remember where the next agent.log pages start (their own
	// lock, package logpage).
	cursors logpage.Cursors
}

// activeTurn is the turn an agent is running.
type activeTurn struct {
	runID  string
	rerun  bool
	cancel context.CancelFunc
	done   chan struct{}
	// tools is the ToolCaller of the attempt in progress (nil between
	// attempts): calls made with the agent's credential join it.
	tools *runTools
}

func newAgent(id string, log store.Log, p *projection) *agent {
	return &agent{
		id:  id,
		log: log,
		p:   p,
	}
}

// cancelTurn cancels the running turn, if any.
func (a *agent) cancelTurn() {
	a.mu.Lock()
	cur := a.cur
	a.mu.Unlock()
	if cur != nil {
		cur.cancel()
	}
}

// snapshot returns a copy of the fields read paths need, under the lock.
func (a *agent) name() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.p.Name
}

func (a *agent) terminated() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.p.Terminated
}

// applyCommitted folds entries of this agent's log into its projection. The
// event log calls it, in seq order, once the entries are durable; a fold
// error is reported through onErr for the entry. It reports whether the
// log has grown enough for a checkpoint: by any entry while the agent is at
// rest, by every entries since its last checkpoint while it runs a turn
// (never when every is 0 or less: checkpoints are off).
func (a *agent) applyCommitted(es []eventlog.Entry, every int, onErr func(eventlog.Entry, error)) (checkpointDue bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, e := range es {
		if err := a.p.Apply(e); err != nil {
			onErr(e, err)
		}
	}
	if every <= 0 { // no checkpoints
		return false
	}
	return !a.busy || a.p.LastSeq >= a.ckptSeq.Load()+uint64(every)
}
