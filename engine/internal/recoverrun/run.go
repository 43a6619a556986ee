// Package recoverrun drives a recovery: the steps by which the engine
// rebuilds its agents from the store when it starts (Recover), and takes
// into a running engine the agents of a cluster store whose owner's lease
// lapsed (Takeover), in their order, with the report of what they did.
//
// The steps of a recovery at start, in order (Run.Recover):
//
//  1. prepare: the agents' directory made durable, the previous run's
//     processes killed; wakes held back; the operator's inbox opened;
//  2. list the agents and claim them (on a cluster store, those another
//     daemon holds are left to it);
//  3. load: each log opened and folded (package agentload);
//  4. classify (package placement): damaged logs listed corrupt,
//     uncreated directories settled (an orphan removed, anything else
//     quarantined, never deleted), terminated agents remembered;
//  5. place the live agents in the tree, parents first: a child whose
//     parent is gone is terminated, one whose parent is quarantined or
//     could not be opened is listed with that cause;
//  6. restore each placed agent: session.json (read when first needed, or
//     by the scrub), its resume tokens, its open run marked interrupted
//     when a previous start was running it;
//  7. adopt: subscriptions indexed, messages sent but not received
//     delivered, so are the notices a transition owes (notices.owed) that
//     their subscribers lack, waits expired and announced, pending messages counted
//     and reminders armed; wakes let go;
//  8. finish: spawns a crash cut off created, the projections pruned,
//     unstarted children bootstrapped, agents with messages woken;
//  9. scrub in the background (the session.json files not read yet read,
//     checkpoints written, the lines a checkpoint skipped verified), and on
//     a cluster store the takeover scan armed.
//
// A takeover scan (Run.Takeover) does steps 2 to 8 for the agents no
// daemon holds, restoring each agent before it is placed, so that no turn
// starts on an open run before it is marked.
//
// What the steps do to the engine's agents, locks and services goes
// through Host, which the engine implements; what they decide (the
// classes, the settlement of uncreated directories, the corrupt causes,
// the tokens to reinstall, the runs to mark, what is counted in the
// Report) is here, with the log lines that say it.
//
// # Goroutines and locks
//
// A Run has no lock and no goroutine of its own: Recover and Takeover run
// on their caller's goroutine (the engine serialises the takeover scans);
// the scrub runs on the goroutine Host.Background gives it, the takeover
// scans on the timer callbacks of Host.ArmTakeover.
package recoverrun

import (
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/engine/internal/placement"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/store"
)

// Report summarises what a recovery did.
type Report struct {
	Agents      int
	Terminated  int
	Orphans     int
	Corrupt     int
	Interrupted int
	Pending     int
	// Quarantined counts agent directories moved to <home>/quarantine:
	// unreadable, without a durable agent.created, yet not provably empty.
	Quarantined int
	// Resumed counts the agents whose fold started from a checkpoint.
	Resumed int
}

// Agent is one agent directory read back from the store.
type Agent[A Record] struct {
	ID    string
	Log   store.Log
	State *projection.State
	// Agent is the engine's agent made of it: by Host.Load when its log
	// was opened, by Host.ListCorrupt otherwise.
	Agent A
	// Err: the log is damaged or could not be opened.
	Err error
	// Missing: there is no events.jsonl.
	Missing bool
	// Resumed is the checkpoint's line when the fold started from it (the
	// lines before it are checked by the scrub).
	Resumed *eventlog.Resume
}

// Run is one engine's recovery. Every field is required.
type Run[A Record] struct {
	Host Host[A]
	// FS, Home and Dir (an agent's directory) are where uncreated agent
	// directories are settled and stale temporary files removed.
	FS   faultfs.FS
	Home string
	Dir  func(id string) string
	Now  func() time.Time
	// BootID is this start's: an open run of another start is marked
	// interrupted.
	BootID string
	// Clustered: the store's leases can lapse (any store but the local
	// one): uncreated logs are not local directories, and the takeover
	// scan runs.
	Clustered bool
	// Checkpoints: the engine writes checkpoints, so a recovery is
	// followed by a scrub.
	Checkpoints bool
	// Every is the interval of the takeover scans.
	Every  time.Duration
	Logger hclog.Logger
}

// Recover rebuilds every agent from the store (the package doc lists the
// steps). It returns an error only when the agents cannot be listed or
// the operator's inbox cannot be opened; an agent that cannot be read is
// listed corrupt, not an error.
func (r *Run[A]) Recover() (Report, error) {
	var rep Report
	h := r.Host
	if err := h.Prepare(); err != nil {
		return rep, err
	}
	h.SetRecovering(true)
	defer h.SetRecovering(false)
	if err := h.OpenUserInbox(); err != nil {
		return rep, err
	}
	ids, err := h.AgentIDs()
	if err != nil {
		return rep, err
	}
	ids, elsewhere := h.Claimable(ids)
	live, existing, ended := r.classify(h.Load(ids, true), &rep)
	for _, id := range elsewhere {
		existing[id] = true // another daemon runs it: its spawn is not redone
	}
	r.loadQuarantine()
	placed := r.place(live, &rep)
	for _, l := range placed {
		r.restore(l, &rep)
	}
	rep.Agents = len(placed)
	for _, l := range placed {
		for _, sub := range l.State.Subs {
			if _, ok := live[sub.Target]; ok {
				h.IndexSubscription(sub, l.ID)
			}
		}
	}
	// Messages recorded by their sender but missing from their recipient's
	// log (a crash between the two writes) are delivered now.
	for _, l := range placed {
		h.Redeliver(l)
	}
	// So are the notices a transition owes (a crash between its write
	// and theirs), a terminated agent's last among them.
	for _, l := range placed {
		h.OwedNotices(l)
	}
	for _, l := range ended {
		h.OwedNotices(l)
	}
	h.SettleWaits()
	r.arm(placed, &rep)
	h.SetRecovering(false)
	r.Logger.Info("recovery finished", "agents", rep.Agents, "terminated", rep.Terminated, "orphans", rep.Orphans,
		"corrupt", rep.Corrupt, "quarantined", rep.Quarantined, "interrupted", rep.Interrupted, "pending", rep.Pending, "from_checkpoints", rep.Resumed)
	r.finish(placed, existing)
	h.WakeAll()
	r.startScrub(placed)
	r.startTakeover()
	return rep, nil
}

// Takeover claims the agents of a cluster store that no daemon holds and
// that the engine does not run, and recovers them into it as Recover
// does. On the local store, or once the engine is stopping, it does
// nothing. The caller serialises the scans.
func (r *Run[A]) Takeover() (Report, error) {
	var rep Report
	h := r.Host
	if !r.Clustered || h.Stopping() {
		return rep, nil
	}
	ids, err := h.StoreAgents()
	if err != nil {
		return rep, err
	}
	fresh := false
	for _, id := range ids {
		if !h.Known(id) {
			fresh = true
			break
		}
	}
	if !fresh {
		return rep, nil
	}
	take, _ := h.Claimable(ids)
	if len(take) == 0 {
		return rep, nil
	}
	live, existing, _ := r.classify(r.loadedOrLater(h.Load(take, false)), &rep)
	for _, id := range ids {
		existing[id] = true // a spawn whose child exists anywhere is not redone
	}
	// Runs are marked before the agents are placed, so that no turn can
	// start on one (a send over the socket) before its open run is marked.
	for _, l := range live {
		r.restore(l, &rep)
		h.LoadSnapshot(l) // read now: a takeover has no scrub to read it
	}
	placed := r.place(live, &rep)
	rep.Agents = len(placed)
	h.AdoptTaken(placed)
	r.arm(placed, &rep)
	r.finish(placed, existing)
	for _, l := range placed {
		h.Wake(l)
	}
	r.Logger.Info("took over agents whose owner's lease lapsed", "agents", rep.Agents, "terminated", rep.Terminated,
		"corrupt", rep.Corrupt, "interrupted", rep.Interrupted, "pending", rep.Pending)
	h.Changed()
	return rep, nil
}

// startTakeover arms the periodic takeover scan on a cluster store: every
// Every on the engine's clock, the next armed when a scan ends.
func (r *Run[A]) startTakeover() {
	if !r.Clustered {
		return
	}
	var tick func()
	tick = func() {
		if err := r.Host.Scan(); err != nil {
			r.Logger.Warn("takeover scan", "err", err)
		}
		r.Host.ArmTakeover(r.Now().Add(r.Every), tick)
	}
	r.Host.ArmTakeover(r.Now().Add(r.Every), tick)
}

// arm counts the placed agents' pending messages and arms their
// reminders.
func (r *Run[A]) arm(placed []*Agent[A], rep *Report) {
	for _, l := range placed {
		rep.Pending += r.Host.Arm(l)
	}
}

// finish creates the children whose creation a crash cut off, prunes what
// only this recovery needed, and bootstraps the children that never
// started, each step over every placed agent before the next.
func (r *Run[A]) finish(placed []*Agent[A], existing placement.Existing) {
	for _, l := range placed {
		r.Host.FinishCutSpawns(l, existing)
	}
	for _, l := range placed {
		r.Host.Prune(l, existing)
	}
	for _, l := range placed {
		r.Host.BootstrapUnstarted(l)
	}
}
