package engine

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/warren-dev/warren/atomicfile"
	"github.com/warren-dev/warren/engine/internal/placement"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/quarantine"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/session"
	"github.com/warren-dev/warren/token"
)

// Recovery at start (SPEC 9), in order (Recover):
//
//  1. prepare: the agents' directory made durable, the previous run's
//     processes killed; wakes held back; the operator's inbox opened;
//  2. list the agents and claim them (on a cluster store, those another
//     daemon holds are left to it);
//  3. load: each log opened and folded (load.go);
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
//     their subscribers lack, waits expired and announced, pending
//     messages counted and reminders armed; wakes let go;
//  8. finish: spawns a crash cut off created, the projections pruned,
//     unstarted children bootstrapped, agents with messages woken;
//  9. scrub in the background (the session.json files not read yet read,
//     checkpoints written, the lines a checkpoint skipped verified), and on
//     a cluster store the takeover scan armed.
//
// A takeover scan (Takeover, takeover.go) does steps 2 to 8 for the
// agents no daemon holds, restoring each agent before it is placed, so
// that no turn starts on an open run before it is marked.
//
// Recover and Takeover run on their caller's goroutine (the takeover
// scans are serialised by takeoverMu); the scrub runs as background work
// of the scheduler, the takeover scans on its timer callbacks.

// RecoveryReport summarises what a recovery did.
type RecoveryReport struct {
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

// Recover rebuilds every agent from the logs: WAL replay and torn-tail
// repair, orphan cleanup, the tree, inboxes, gates, subscriptions,
// reminders, interrupted runs and waits. It wakes agents with pending
// messages at the end (unless NoWake). It returns an error only when the
// agents cannot be listed or the operator's inbox cannot be opened; an
// agent that cannot be read is listed corrupt, not an error.
func (c *Core) Recover(ctx context.Context) (RecoveryReport, error) {
	var rep RecoveryReport
	if err := c.prepareRecovery(); err != nil {
		return rep, err
	}
	c.agents.SetRecovering(true) // wakes wait for the end
	defer c.agents.SetRecovering(false)
	if err := c.openUserInbox(ctx); err != nil {
		return rep, err
	}
	ids, refused, err := c.agentIDs(ctx)
	if err != nil {
		return rep, err
	}
	ids, elsewhere := c.claimable(ctx, ids)
	kept, later := c.loadedOrLater(ctx, c.loadAllRefusing(ctx, ids, refused, true))
	live, existing, ended := c.classify(ctx, kept, &rep)
	for _, id := range append(elsewhere, later...) {
		// Another daemon runs it, or the next takeover scan loads it:
		// its spawn is not redone.
		existing[id] = true
	}
	c.loadQuarantine()
	placed := c.place(live, &rep)
	for _, l := range placed {
		c.restore(l, &rep)
	}
	rep.Agents = len(placed)
	// Subscriptions to agents that are not live are not indexed.
	for _, l := range placed {
		for _, sub := range l.State.Subs {
			if _, ok := live[sub.Target]; ok {
				c.agents.Index(sub, l.ID)
			}
		}
	}
	for _, l := range placed {
		c.redeliverRefs(ctx, l.ID, l.Agent.Sent(), true)
	}
	// The notices a crash kept back: of live agents' transitions, and of
	// agents whose termination it cut off after agent.terminated.
	for _, l := range placed {
		c.notify(l.Agent)
	}
	for _, l := range ended {
		c.notify(l.Agent)
	}
	c.sweepWaits()
	c.noticeWaits()
	c.arm(placed, &rep)
	c.agents.SetRecovering(false)
	c.log.Info("recovery finished", "agents", rep.Agents, "terminated", rep.Terminated, "orphans", rep.Orphans,
		"corrupt", rep.Corrupt, "quarantined", rep.Quarantined, "interrupted", rep.Interrupted, "pending", rep.Pending,
		"from_checkpoints", rep.Resumed)
	c.finish(ctx, placed, existing)
	c.afterStart(ctx, agentsOf(placed))
	c.WakeAll()
	c.startScrub(placed)
	c.startTakeover()
	return rep, nil
}

// prepareRecovery makes the agents' directory durable, kills the
// recorded processes of the previous run and lets the live event stream
// show resume secrets.
func (c *Core) prepareRecovery() error {
	if err := c.fs.MkdirAll(c.agentsDir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", c.agentsDir, err)
	}
	// The home and its ancestors, once per start: a new agent's log then
	// fsyncs only the directories it adds (eventlog, issue 38). Past the
	// home's parent a refusal (a read-only or special filesystem) is
	// ignored.
	for dir, i := c.opts.Home, 0; ; i++ {
		if err := c.fs.SyncDir(dir); err != nil && i <= 1 {
			return fmt.Errorf("syncing %s: %w", dir, err)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	c.launches.KillLeftovers()
	c.bus.SetSecret(c.liveSecret)
	return nil
}

// liveSecret is the resume secret of a wait that began in this process
// and was not handed out yet (the live run.waiting event carries it).
func (c *Core) liveSecret(agentID, runID string) string {
	a, ok := c.agent(agentID)
	if !ok {
		return ""
	}
	return a.Resumes().Secret(runID)
}

// classify sorts the agents read back (package placement): damaged logs
// listed corrupt, uncreated directories settled, terminated agents
// remembered (ended: those whose last notices are owed), the rest live.
// existing are the ids that exist for the spawns a crash cut off.
func (c *Core) classify(ctx context.Context, all []*loaded, rep *RecoveryReport) (live map[string]*loaded, existing placement.Existing, ended []*loaded) {
	live = map[string]*loaded{}
	ls := make([]placement.Loaded, len(all))
	for i, l := range all {
		ls[i] = placement.Loaded{ID: l.ID, Parent: l.State.ParentID, Damaged: l.Err != nil, Created: l.State.Created, Terminated: l.State.Terminated}
	}
	cl := placement.Classify(ls)
	for i, l := range all {
		if cl.Classes[i] != placement.Live && !(cl.Classes[i] == placement.Corrupt && placedCorrupt(l)) {
			l.State.Pending.Attach(nil) // not served: its messages do not count
		}
		switch cl.Classes[i] {
		case placement.Corrupt:
			rep.Corrupt++
			if errors.Is(l.Err, errUnopened) {
				c.log.Error("agent log could not be opened; the agent is listed with the cause until a restart", "agent", l.ID, "err", l.Err)
			} else {
				c.log.Error("agent log is damaged; the agent is listed as corrupt", "agent", l.ID, "err", l.Err)
			}
			if placedCorrupt(l) {
				live[l.ID] = l
				continue
			}
			if l.State.Name == "" {
				l.State.Name = l.ID
			}
			c.listCorrupt(l, l.Err)
		case placement.Uncreated:
			c.settleUncreated(l, cl.Parents[l.ID], rep)
		case placement.Gone:
			rep.Terminated++
			c.agents.Forget(l.ID, l.State.Name, l.State.ParentID)
			if l.State.Notices != nil {
				ended = append(ended, l)
			}
			_ = l.Log.Close()
			c.claims.Drop(ctx, l.ID) // nothing more is written for it
		default:
			live[l.ID] = l
			if l.Resumed != nil {
				rep.Resumed++
			}
		}
	}
	return live, cl.Existing, ended
}

// agentsOf is the records of ls.
func agentsOf(ls []*loaded) []*agent {
	out := make([]*agent, 0, len(ls))
	for _, l := range ls {
		if l.Agent != nil {
			out = append(out, l.Agent)
		}
	}
	return out
}

// placedCorrupt reports whether a damaged agent is placed in the tree all
// the same: its good prefix names it and its parent, so it is listed
// corrupt in its place and its healthy children keep theirs (SPEC 9:
// nothing is lost to damage).
func placedCorrupt(l *loaded) bool {
	return l.State.Created && !l.State.Terminated && !errors.Is(l.Err, errUnopened)
}

// listCorrupt lists an agent whose log cannot be used, with the cause,
// and without a log.
func (c *Core) listCorrupt(l *loaded, cause error) {
	a := newAgent(l.ID, nil, l.State)
	a.MarkCorrupt(cause)
	l.Agent = a
	c.agents.Put(l.ID, a)
}

// settleUncreated settles a directory without a durable agent.created
// (placement.Settle): an orphan of a crash during creation is removed,
// anything else moved to the quarantine, never deleted (on a cluster
// store, listed corrupt: there is no directory to move).
func (c *Core) settleUncreated(l *loaded, isParent bool, rep *RecoveryReport) {
	if l.Log != nil {
		_ = l.Log.Close()
	}
	dir := c.agentDir(l.ID)
	why, empty := quarantine.ProvablyEmpty(c.fs, dir, l.Missing, l.Log)
	settle, why := placement.Settle(why, empty, isParent, c.clustered(), l.Missing)
	switch settle {
	case placement.RemoveOrphan:
		rep.Orphans++
		c.log.Warn("removing an orphan agent directory (crash during creation: it holds no acknowledged entry)", "agent", l.ID)
		c.removeOrphanDir(l.ID)
		return
	case placement.ListCorrupt:
		rep.Corrupt++
		c.log.Error("agent log without agent.created in the cluster store; listed as corrupt", "agent", l.ID, "why", why)
		l.State.Name = l.ID
		c.listCorrupt(l, fmt.Errorf("its log in the cluster store holds no agent.created (%s); it is not quarantined (see `warren export`)", why))
		return
	}
	home := c.opts.Home
	dst, moved, err := quarantine.Move(c.fs, home, dir, c.now())
	if moved && err != nil {
		c.log.Error("quarantined an agent directory, but making the move durable failed", "agent", l.ID, "to", dst, "err", err)
	}
	if !moved {
		rep.Corrupt++
		c.log.Error("agent directory without agent.created could not be quarantined; listed as corrupt",
			"agent", l.ID, "why", why, "err", err)
		l.State.Name = l.ID
		c.listCorrupt(l, fmt.Errorf("%s: %s; moving it to %s failed: %w", dir, why,
			filepath.Join(home, quarantine.Dir), err))
		return
	}
	rep.Quarantined++
	c.log.Warn("moved an unreadable agent directory to quarantine; nothing was deleted",
		"agent", l.ID, "why", why, "to", dst)
}

// loadQuarantine reads which agent ids the quarantine holds.
func (c *Core) loadQuarantine() {
	q, err := quarantine.Index(c.fs, c.opts.Home)
	if err != nil {
		c.log.Warn("cannot list the quarantine directory", "dir", filepath.Join(c.opts.Home, quarantine.Dir), "err", err)
	}
	c.agents.SetQuarantine(q)
}

// place puts the live agents in the tree, parents first (placement.Order):
// a child whose parent is gone is terminated, one whose parent is
// quarantined or could not be opened is listed with that cause. It
// returns the agents placed, in order.
func (c *Core) place(live map[string]*loaded, rep *RecoveryReport) []*loaded {
	cands := make([]placement.Candidate, 0, len(live))
	for _, l := range live {
		cands = append(cands, placement.Candidate{ID: l.ID, Parent: l.State.ParentID, Created: l.State.CreatedTS, Corrupt: l.Err != nil})
	}
	var placed []*loaded
	for _, st := range placement.Order(cands, c.agents.Parents(cands)) {
		l := live[st.ID]
		parent := l.State.ParentID
		var cause error
		switch st.Action {
		case placement.Terminate:
			c.terminateOrphan(l, rep)
			continue
		case placement.ParentQuarantined:
			q := c.agents.QuarantinedAs(parent)
			c.log.Error("an agent's parent directory is in quarantine; the agent is listed as corrupt", "agent", l.ID, "parent", parent, "quarantined_at", q)
			cause = fmt.Errorf("its parent %s is in quarantine (%s): restore that directory to %s and restart the daemon, or remove it",
				parent, q, c.agentDir(parent))
		case placement.ParentUnopened:
			pc := errUnopened // if the parent went meanwhile
			if pa, ok := c.agent(parent); ok && pa != nil {
				pc = pa.Corrupt()
			}
			c.log.Error("an agent's parent log could not be opened; the agent is listed with it", "agent", l.ID, "parent", parent)
			cause = fmt.Errorf("its parent %s: %w", parent, pc)
		case placement.ParentUnplaced, placement.ParentMissing:
			why := "is listed outside the tree (its log names no place for it)"
			if st.Action == placement.ParentMissing {
				why = "has no readable directory under agents/ and no record of its termination"
			}
			c.log.Error("an agent's parent cannot be placed; the agent is kept, listed with the reason, reachable by id", "agent", l.ID, "parent", parent)
			cause = fmt.Errorf("its parent %s %s: nothing is terminated because of it; restore the parent's directory and restart the daemon", parent, why)
		default:
			if err := c.tree.Add(l.ID, l.State.Name, l.State.ParentID); err != nil {
				c.log.Error("agent cannot be placed in the tree; listed as corrupt", "agent", l.ID, "err", err)
				cause = fmt.Errorf("cannot rebuild its place in the tree: %w", err)
				break
			}
			if l.Err != nil {
				// A damaged log: in the tree, so its children keep their
				// paths, and listed corrupt (counted by classify).
				c.listCorrupt(l, l.Err)
				continue
			}
			c.agents.Put(l.ID, l.Agent)
			placed = append(placed, l)
			continue
		}
		if l.Err != nil {
			c.listCorrupt(l, fmt.Errorf("%w; and %w", l.Err, cause))
			continue
		}
		l.Agent.MarkCorrupt(cause) // not listed yet: nobody else sees it
		c.agents.Put(l.ID, l.Agent)
		rep.Corrupt++
	}
	return placed
}

// terminateOrphan terminates a child whose parent's log records its
// termination.
func (c *Core) terminateOrphan(l *loaded, rep *RecoveryReport) {
	c.log.Warn("terminating an agent whose parent is gone", "agent", l.ID, "parent", l.State.ParentID)
	if _, err := l.Log.Append(schema.AgentTerminated, schema.AgentTerminatedData{AgentID: l.ID}); err != nil {
		c.log.Error("logging agent.terminated for an orphan child", "agent", l.ID, "err", err)
	}
	_ = l.Log.Close()
	l.State.Pending.Attach(nil)
	c.agents.Forget(l.ID, l.State.Name, l.State.ParentID)
	rep.Terminated++
}

// restore gives a placed agent its session.json (read at first use),
// reinstalls its resume tokens (a live wait's, and the last consumed one
// so a repeated resume finds it), and marks its open run interrupted when
// an earlier start was running it (exactly one run.interrupted per run).
func (c *Core) restore(l *loaded, rep *RecoveryReport) {
	id, facts := l.ID, factsOf(l.State)
	l.Agent.Snap.Defer(func() *session.Session { return c.restoredSnapshot(id, facts) })
	_ = atomicfile.CleanTemps(c.fs, c.agentDir(l.ID))
	if lr := l.State.LastResume; lr != nil {
		tok := token.Token{ID: lr.TokenID, AgentID: l.ID, RunID: lr.RunID, SecretHash: lr.SecretHash,
			State: token.Consumed, Response: lr.Response}
		if err := c.tokens.Add(tok); err != nil {
			c.log.Warn("reinstalling a consumed resume token", "agent", l.ID, "token", tok.ID, "err", err)
		}
	}
	run := l.State.Run
	if run == nil || run.Ended {
		return
	}
	if run.Wait != nil && run.Wait.TokenState == string(schema.TokLive) {
		tok := token.Token{ID: run.Wait.TokenID, AgentID: l.ID, RunID: run.RunID, SecretHash: run.Wait.SecretHash,
			Deadline: run.Wait.Deadline, State: token.Live}
		if err := c.tokens.Add(tok); err != nil {
			c.log.Error("reinstalling a resume token", "agent", l.ID, "token", tok.ID, "err", err)
		}
		return
	}
	if !l.Agent.NeedsRestartMark(c.bootID) {
		return
	}
	reason := schema.ReasonProcessRestart
	if l.Agent.UnderEarlierClaim() {
		reason = schema.ReasonTakeover // another daemon of the cluster ran it
	}
	if _, err := l.Log.Append(schema.RunInterrupted, schema.RunInterruptedData{RunID: run.RunID, Reason: reason}); err != nil {
		c.log.Error("logging run.interrupted", "agent", l.ID, "run", run.RunID, "err", err)
		return
	}
	rep.Interrupted++
}

// arm counts the placed agents' pending messages toward the total limits
// and arms their reminders.
func (c *Core) arm(placed []*loaded, rep *RecoveryReport) {
	for _, l := range placed {
		l.Agent.CountIn(&c.pending)
		ids, n := l.Agent.Reminders()
		for _, id := range ids {
			c.armReminder(l.Agent, id)
		}
		rep.Pending += n
	}
}

// finish creates the children whose creation a crash cut off, prunes
// what only this recovery needed, and bootstraps the children that never
// started, each step over every placed agent before the next.
func (c *Core) finish(ctx context.Context, placed []*loaded, existing placement.Existing) {
	for _, l := range placed {
		for _, sp := range l.Agent.CutSpawns(existing) {
			c.log.Warn("finishing a spawn a crash cut off", "parent", l.ID, "child", sp.ChildID)
			c.respawn(ctx, l.Agent, sp)
		}
	}
	for _, l := range placed {
		l.Agent.Prune(existing, func(sr sentRef) bool {
			r, ok := c.agent(sr.To)
			if !ok {
				return false // the user, or an agent that is gone: never redelivered
			}
			has, _, corrupt := r.Inbox(sr.ID)
			return corrupt || !has
		})
	}
	for _, l := range placed {
		if l.Agent.NeedsBootstrap() && !c.opts.NoWake {
			c.bootstrap(l.Agent)
		}
	}
}

// startScrub reads the session.json files not read yet, writes the
// checkpoints of every log recovery folded lines of, and verifies the
// lines a checkpoint let recovery skip, in the background.
func (c *Core) startScrub(placed []*loaded) {
	var resumed []*loaded
	for _, l := range placed {
		if l.Resumed != nil {
			resumed = append(resumed, l)
		}
	}
	scrubbed := func() { c.scrubOnce.Do(func() { close(c.scrubbed) }) }
	if !c.goBackground(func() {
		defer scrubbed()
		for _, l := range placed {
			if c.stopping() {
				return
			}
			l.Agent.Snap.Load()
		}
		if c.opts.CheckpointEvery <= 0 {
			return
		}
		c.ckpts.All(c.agentList(), 1, true) // every log that recovery folded lines of
		c.scrub(resumed)
	}) {
		scrubbed()
	}
}

// scrub verifies the lines before each checkpoint recovery started from;
// an agent whose earlier lines fail is listed corrupt, as a full fold
// would have listed it, and its checkpoint is removed. Lines that pass are
// folded again and compared with the checkpoint's state (scrubState).
func (c *Core) scrub(ls []*loaded) {
	for _, l := range ls {
		if c.stopping() {
			return
		}
		err := l.Log.VerifyPrefix()
		if err == nil {
			c.scrubState(c.ctx, l)
			continue
		}
		if !errors.Is(err, eventlog.ErrCorrupt) {
			c.log.Warn("scrub could not read a log", "agent", l.ID, "err", err)
			continue
		}
		c.log.Error("agent log is damaged before its checkpoint; the agent is listed as corrupt", "agent", l.ID, "err", err)
		l.Agent.MarkCorrupt(err)
		c.ckpts.Remove(l.ID)
		c.changed.Fire()
	}
}

// stopping reports whether Close has begun.
func (c *Core) stopping() bool { return c.agents.Closed() }

// Quarantined is the number of agent directories the quarantine holds.
func (c *Core) Quarantined() int { return c.agents.Quarantined() }

// afterStart is what a start and a takeover do once the agents they placed
// are loaded: repair their workspaces, check their sandboxes, then re-run
// their interrupted runs under the resume policy.
func (c *Core) afterStart(ctx context.Context, agents []*agent) {
	c.repairWorkspaces(ctx, agents)
	c.checkSandboxes(ctx, agents)
	c.resumeAfterStart(agents)
}
