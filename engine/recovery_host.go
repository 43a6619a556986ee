package engine

import (
	"fmt"
	"time"

	"github.com/warren-dev/warren/engine/internal/agentload"
	"github.com/warren-dev/warren/engine/internal/placement"
	"github.com/warren-dev/warren/session"
	"github.com/warren-dev/warren/token"
)

// recoveryHost is the Core as a recovery's host (recoverrun.Host): each
// method does one step on the Core's agents under its locks (the roster's and an
// agent's a.mu are never held together, as everywhere).
type recoveryHost struct{ c *Core }

func (h recoveryHost) Prepare() error {
	c := h.c
	if err := c.fs.MkdirAll(c.agentsDir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", c.agentsDir, err)
	}
	if err := c.fs.SyncDir(c.opts.Home); err != nil {
		return fmt.Errorf("syncing %s: %w", c.opts.Home, err)
	}
	// Processes of the previous run are killed before any turn can re-run.
	c.launches.KillLeftovers()
	c.bus.SetSecret(c.liveSecret)
	return nil
}

func (h recoveryHost) SetRecovering(on bool) { h.c.agents.SetRecovering(on) }

func (h recoveryHost) OpenUserInbox() error                        { return h.c.openUserInbox() }
func (h recoveryHost) AgentIDs() ([]string, error)                 { return h.c.agentIDs() }
func (h recoveryHost) StoreAgents() ([]string, error)              { return h.c.st.Agents(h.c.ctx) }
func (h recoveryHost) Known(id string) bool                        { return h.c.known(id) }
func (h recoveryHost) Stopping() bool                              { return h.c.stopping() }
func (h recoveryHost) Claimable(ids []string) ([]string, []string) { return h.c.claimable(ids) }
func (h recoveryHost) DropLease(id string)                         { h.c.dropLease(id) }
func (h recoveryHost) Load(ids []string, retry bool) []*loaded     { return h.c.loadAll(ids, retry) }
func (h recoveryHost) RemoveOrphanDir(id string)                   { h.c.removeOrphanDir(id) }
func (h recoveryHost) AddToTree(l *loaded) error {
	return h.c.tree.Add(l.ID, l.State.Name, l.State.ParentID)
}
func (h recoveryHost) AddToken(tok token.Token) error     { return h.c.tokens.Add(tok) }
func (h recoveryHost) AdoptTaken(placed []*loaded)        { h.c.adoptPlaced(placed) }
func (h recoveryHost) Wake(l *loaded)                     { h.c.wake(l.Agent) }
func (h recoveryHost) WakeAll()                           { h.c.WakeAll() }
func (h recoveryHost) Changed()                           { h.c.changed.Fire() }
func (h recoveryHost) Background(f func()) bool           { return h.c.goBackground(f) }
func (h recoveryHost) CheckpointAll()                     { h.c.ckpts.All(h.c.agentList(), 1, true) }
func (h recoveryHost) Scrubbed()                          { h.c.scrubOnce.Do(func() { close(h.c.scrubbed) }) }
func (h recoveryHost) RemoveCheckpoint(id string)         { h.c.ckpts.Remove(id) }
func (h recoveryHost) ArmTakeover(at time.Time, f func()) { h.c.sched.Arm("", takeoverTimer, at, f) }

func (h recoveryHost) IndexSubscription(sub subscriptionRec, subscriber string) {
	h.c.agents.Index(sub, subscriber)
}

func (h recoveryHost) Scan() error {
	_, err := h.c.Takeover()
	return err
}

func (h recoveryHost) ListCorrupt(l *loaded, cause error) {
	a := newAgent(l.ID, nil, l.State)
	a.MarkCorrupt(cause)
	l.Agent = a
	h.c.agents.Put(l.ID, a)
}

func (h recoveryHost) Forget(l *loaded)                  { h.c.agents.Forget(l.ID, l.State.Name, l.State.ParentID) }
func (h recoveryHost) SetQuarantine(q map[string]string) { h.c.agents.SetQuarantine(q) }
func (h recoveryHost) QuarantinedAs(id string) string    { return h.c.agents.QuarantinedAs(id) }

// Parents reads each parent (package roster).
func (h recoveryHost) Parents(cands []placement.Candidate) map[string]placement.Parent {
	return h.c.agents.Parents(cands)
}

func (h recoveryHost) ParentCause(id string) error {
	cause := agentload.ErrUnopened // if the parent went meanwhile
	if pa, ok := h.c.agent(id); ok && pa != nil {
		cause = pa.Corrupt()
	}
	return cause
}

func (h recoveryHost) List(l *loaded, cause error) {
	if cause != nil {
		l.Agent.MarkCorrupt(cause) // not listed yet: nobody else sees it
	}
	h.c.agents.Put(l.ID, l.Agent)
}

func (h recoveryHost) Snapshot(l *loaded) {
	c, id, facts := h.c, l.ID, agentload.FactsOf(l.State)
	l.Agent.Snap.Defer(func() *session.Session {
		return agentload.Snapshot(c.store, c.fs, c.snapshotPath(id), id, facts, c.now, c.log)
	})
}

func (h recoveryHost) LoadSnapshot(l *loaded) { l.Agent.Snap.Load() }

func (h recoveryHost) Redeliver(l *loaded) {
	h.c.redeliverRefs(h.c.ctx, l.ID, l.Agent.Sent(), true)
}

func (h recoveryHost) OwedNotices(l *loaded) { h.c.notify(l.Agent) }

func (h recoveryHost) SettleWaits() {
	h.c.SweepWaits()
	h.c.noticeWaits()
}

func (h recoveryHost) Arm(l *loaded) int {
	l.Agent.CountIn(&h.c.pending) // counts toward the total limits
	ids, n := l.Agent.Reminders()
	for _, id := range ids {
		h.c.armReminder(l.Agent, id)
	}
	return n
}

// FinishCutSpawns redoes them in runs that have ended (their ids are
// derived, so this is idempotent); spawns of an open run are redone when
// it is resumed.
func (h recoveryHost) FinishCutSpawns(l *loaded, existing placement.Existing) {
	for _, sp := range l.Agent.CutSpawns(existing) {
		h.c.log.Warn("finishing a spawn a crash cut off", "parent", l.ID, "child", sp.ChildID)
		h.c.respawn(h.c.ctx, l.Agent, sp)
	}
}

// Prune drops sent envelopes their recipients have, or that can never be
// redelivered (to the user, to an agent that is gone), and spawns whose
// child exists. What stays is what a later recovery may still need (a
// message that reached its sender's log but not its recipient's); it goes
// into the next checkpoint.
func (h recoveryHost) Prune(l *loaded, existing placement.Existing) {
	l.Agent.Prune(existing, func(sr sentRef) bool {
		r, ok := h.c.agent(sr.To)
		if !ok {
			return false // the user, or an agent that is gone: never redelivered
		}
		has, _, corrupt := r.Inbox(sr.ID)
		return corrupt || !has
	})
}

func (h recoveryHost) BootstrapUnstarted(l *loaded) {
	if l.Agent.NeedsBootstrap() && !h.c.opts.NoWake {
		h.c.bootstrap(l.Agent)
	}
}
