package engine

import (
	"fmt"
	"time"

	"github.com/warren-dev/warren/inbox"

	"github.com/warren-dev/warren/engine/internal/placement"
	fold "github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/session"
)

// What recovery and takeover read and prune of an agent read back (package
// recovery's steps), and its checkpoint's state.

// NeedsRestartMark reports whether the agent's open run was running in a
// previous start (bootID is this one's) and must be marked interrupted.
func (a *agent) NeedsRestartMark(bootID string) bool {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	return session.NeedsRestartMark(a.Snap.Get(), a.facts(), bootID)
}

// UnderEarlierClaim reports whether the agent's open run began under an
// earlier claim of the agent (a cluster: another daemon ran it since).
func (a *agent) UnderEarlierClaim() bool {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	return a.facts().EarlierClaim
}

// Sent is a copy of the messages the agent's log records as sent and
// whose delivery recovery may still have to check.
func (a *agent) Sent() []fold.SentRef {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	return append([]fold.SentRef(nil), a.p.Sent...)
}

// Reminders returns the ids of the agent's reminders and how many
// messages are pending.
func (a *agent) Reminders() (ids []string, pending int) {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	ids = make([]string, 0, len(a.p.Reminders))
	for id := range a.p.Reminders {
		ids = append(ids, id)
	}
	return ids, a.p.Pending.Len()
}

// CutSpawns are the spawns a crash cut off in the agent's ended runs
// (placement.Existing.CutSpawns).
func (a *agent) CutSpawns(existing placement.Existing) []fold.Spawn {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	return existing.CutSpawns(a.p.Spawns, a.p.Run)
}

// NeedsBootstrap reports whether the agent is a child that never had its
// bootstrap turn.
func (a *agent) NeedsBootstrap() bool {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	return placement.NeedsBootstrap(a.p.Bootstrap, a.p.TurnNo, a.p.Run)
}

// Prune drops sent envelopes that keep says are no longer needed, and
// spawns whose child exists. What stays is what a later recovery may
// still need (a message that reached the agent's log but not its
// recipient's); it goes into the next checkpoint. keep runs without the
// agent's lock (it may look at other agents).
func (a *agent) Prune(existing placement.Existing, keep func(fold.SentRef) bool) {
	a.stateMu.Lock()
	sent, spawns := a.p.Sent, a.p.Spawns
	a.stateMu.Unlock()
	var keepSent []fold.SentRef
	for _, sr := range sent {
		if keep(sr) {
			keepSent = append(keepSent, sr)
		}
	}
	keepSpawns := existing.KeepSpawns(spawns)
	a.stateMu.Lock()
	// Entries applied meanwhile (respawns, bootstrap turns) stay.
	a.p.Sent = placement.Prune(a.p.Sent, len(sent), keepSent)
	a.p.Spawns = placement.Prune(a.p.Spawns, len(spawns), keepSpawns)
	a.stateMu.Unlock()
}

// Subscriptions lists the agent's subscriptions; with targets, only those
// to an agent in it.
func (a *agent) Subscriptions(targets map[string]bool) []fold.Subscription {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	var out []fold.Subscription
	if targets == nil {
		out = make([]fold.Subscription, 0, len(a.p.Subs))
	}
	for _, sub := range a.p.Subs {
		if targets == nil || targets[sub.Target] {
			out = append(out, sub)
		}
	}
	return out
}

// WaitDeadline is the deadline of the agent's live wait (zero when none).
func (a *agent) WaitDeadline() time.Time {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	if a.hasLiveWait() {
		return a.p.Run.Wait.Deadline
	}
	return time.Time{}
}

// CheckpointState is the agent's projection encoded for a checkpoint at
// its log's line seq (at offset off), when one is due: the log has grown
// by at least min entries since the last checkpoint and the agent is in
// a state a checkpoint can hold. The caller holds Ckpt.Mu.
func (a *agent) CheckpointState(min uint64) (seq uint64, off int64, state []byte, due bool, err error) {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	p := a.p
	if a.corrupt != nil || a.Log == nil || p.Replaying() || !p.Created || p.Terminated || p.LastSeq == 0 ||
		p.LastOff < 0 || p.LastSeq < a.Ckpt.Seq.Load()+min {
		return 0, 0, nil, false, nil
	}
	state, err = p.EncodeState()
	return p.LastSeq, p.LastOff, state, true, err
}

// Refold replaces the projection by p, a fold of the agent's log in
// replay mode, unless a turn runs (swapped false: the caller tries again
// after it). Under the record's lock, more folds into p the lines the
// current projection has folded since (up to its last: a commit waiting
// for the lock is folded into p by its own commit), p's pending messages
// are read back (load) and counted in totals instead of the old
// projection's; old is set to the projection replaced.
func (a *agent) Refold(p *fold.State, more func(p *fold.State, upTo uint64) error,
	load fold.Loader, totals *inbox.Totals, old **fold.State) (swapped bool, err error) {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	if a.busy {
		return false, nil
	}
	if p.LastSeq < a.p.LastSeq {
		if err := more(p, a.p.LastSeq); err != nil {
			return false, err
		}
	}
	if p.LastSeq != a.p.LastSeq {
		return false, fmt.Errorf("the fold reached line %d of the log, the projection line %d", p.LastSeq, a.p.LastSeq)
	}
	a.p.Pending.Attach(nil)
	p.Pending.Attach(totals) // before its messages are pushed: the held bound applies
	if err := p.EndReplayMany(load); err != nil {
		p.Pending.Attach(nil)
		a.p.Pending.Attach(totals)
		return false, err
	}
	*old, a.p = a.p, p
	return true, nil
}

// AfterTurn runs f once no turn runs: now, or after the running turn
// with the work deferred during it.
func (a *agent) AfterTurn(f func()) {
	a.stateMu.Lock()
	if a.busy {
		a.deferred = append(a.deferred, f)
		a.stateMu.Unlock()
		return
	}
	a.stateMu.Unlock()
	f()
}
