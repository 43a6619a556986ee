package engine

import (
	"errors"
	"fmt"

	"github.com/warren-dev/warren/atomicfile"
	"github.com/warren-dev/warren/engine/internal/agentload"
	"github.com/warren-dev/warren/engine/internal/placement"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/session"
	"github.com/warren-dev/warren/store"
	"github.com/warren-dev/warren/token"
)

// RecoveryReport summarises what a recovery did.
type RecoveryReport struct {
	Agents      int
	Terminated  int
	Orphans     int
	Corrupt     int
	Interrupted int
	Expired     int
	Pending     int
	// Quarantined counts agent directories moved to <home>/quarantine:
	// unreadable, without a durable agent.created, yet not provably empty.
	Quarantined int
	// Resumed counts the agents whose fold started from a checkpoint.
	Resumed int
}

// loaded is one agent directory read back from disk.
type loaded struct {
	id      string
	log     store.Log
	p       *projection
	a       *agent
	err     error // damaged or unreadable log
	missing bool  // no events.jsonl
	// resumed is the checkpoint's line when the fold started from it (the
	// lines before it are checked by the scrub).
	resumed *eventlog.Resume
}

// Recover rebuilds every agent from the logs: WAL replay and torn-tail
// repair, orphan cleanup, the tree, inboxes, gates, subscriptions,
// reminders, interrupted runs and waits. It wakes agents with pending
// messages at the end (unless NoWake).
func (c *Core) Recover() (RecoveryReport, error) {
	var rep RecoveryReport
	if err := c.fs.MkdirAll(c.agentsDir, 0o700); err != nil {
		return rep, fmt.Errorf("creating %s: %w", c.agentsDir, err)
	}
	if err := c.fs.SyncDir(c.opts.Home); err != nil {
		return rep, fmt.Errorf("syncing %s: %w", c.opts.Home, err)
	}
	// Processes of the previous run are killed before any turn can re-run.
	c.launches.KillLeftovers()
	c.bus.SetSecret(c.liveSecret)
	c.mu.Lock()
	c.recovering = true
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.recovering = false
		c.mu.Unlock()
	}()
	if err := c.openUserInbox(); err != nil {
		return rep, err
	}
	ids, err := c.agentIDs()
	if err != nil {
		return rep, err
	}
	// On a cluster store, agents another daemon holds are left to the
	// takeover scan (takeover.go).
	ids, elsewhere := c.claimable(ids)
	loadedAgents := c.loadAll(ids, true)

	byID, existing := c.classifyLoaded(loadedAgents, &rep)
	for _, id := range elsewhere {
		existing[id] = true // another daemon runs it: its spawn is not redone
	}

	c.loadQuarantine()
	// The tree, parents before children; a child whose parent is gone is
	// terminated (one whose parent is in quarantine is listed as corrupt).
	placed := c.placeTree(byID, &rep)
	for _, l := range placed {
		c.restoreAgent(l, &rep)
	}
	rep.Agents = len(placed)
	for _, l := range placed {
		for _, sub := range l.p.Subs {
			if _, ok := byID[sub.Target]; ok {
				c.indexSubscription(sub, l.id)
			}
		}
	}
	// Messages recorded by their sender but missing from their recipient's
	// log (a crash between the two writes) are delivered now.
	for _, l := range placed {
		l.a.mu.Lock()
		sent := append([]sentRef(nil), l.p.Sent...)
		l.a.mu.Unlock()
		c.redeliverRefs(l.id, sent, true)
	}
	c.SweepWaits()
	c.noticeWaits()
	c.armRecovered(placed, &rep)
	c.mu.Lock()
	c.recovering = false
	c.mu.Unlock()
	c.log.Info("recovery finished", "agents", rep.Agents, "terminated", rep.Terminated, "orphans", rep.Orphans,
		"corrupt", rep.Corrupt, "quarantined", rep.Quarantined, "interrupted", rep.Interrupted, "pending", rep.Pending, "from_checkpoints", rep.Resumed)
	c.finishCutSpawns(placed, existing)
	c.pruneRecovered(placed, existing)
	c.bootstrapUnstarted(placed)
	c.WakeAll()
	c.startScrub(placed)
	c.startTakeover()
	return rep, nil
}

// classifyLoaded sorts the loaded logs: damaged ones are listed corrupt,
// uncreated ones settled (orphan or quarantine), terminated ones closed;
// the rest, by id, are returned to be placed in the tree. existing holds
// every id with a durable agent.created.
func (c *Core) classifyLoaded(loadedAgents []*loaded, rep *RecoveryReport) (byID map[string]*loaded, existing placement.Existing) {
	byID = map[string]*loaded{}
	ls := make([]placement.Loaded, len(loadedAgents))
	for i, l := range loadedAgents {
		ls[i] = placement.Loaded{ID: l.id, Parent: l.p.ParentID, Damaged: l.err != nil, Created: l.p.Created, Terminated: l.p.Terminated}
	}
	cl := placement.Classify(ls)
	for i, l := range loadedAgents {
		switch cl.Classes[i] {
		case placement.Corrupt:
			rep.Corrupt++
			if errors.Is(l.err, agentload.ErrUnopened) {
				c.log.Error("agent log could not be opened; the agent is listed with the cause until a restart", "agent", l.id, "err", l.err)
			} else {
				c.log.Error("agent log is damaged; the agent is listed as corrupt", "agent", l.id, "err", l.err)
			}
			a := newAgent(l.id, nil, l.p)
			a.corrupt = l.err
			if a.p.Name == "" {
				a.p.Name = l.id
			}
			l.a = a
			c.putAgent(l.id, a)
		case placement.Uncreated:
			c.settleUncreated(l, cl.Parents[l.id], rep)
		case placement.Gone:
			rep.Terminated++
			c.mu.Lock()
			c.gone.Remember(l.id, l.p.Name, l.p.ParentID)
			c.mu.Unlock()
			_ = l.log.Close()
			c.dropLease(l.id) // nothing more is written for it
		default:
			byID[l.id] = l
			if l.resumed != nil {
				rep.Resumed++
			}
		}
	}

	return byID, cl.Existing
}

// armRecovered counts the recovered agents' pending messages toward the
// daemon's totals and arms their reminders.
func (c *Core) armRecovered(placed []*loaded, rep *RecoveryReport) {
	for _, l := range placed {
		l.p.Pending.Attach(&c.pending) // counts toward the total limits
		l.a.mu.Lock()
		rep.Pending += l.p.Pending.Len()
		ids := make([]string, 0, len(l.p.Reminders))
		for id := range l.p.Reminders {
			ids = append(ids, id)
		}
		l.a.mu.Unlock()
		for _, id := range ids {
			c.armReminder(l.a, id)
		}
	}
}

// finishCutSpawns creates the children whose deferred creation a crash
// cut off, in runs that have ended (their ids are derived, so this is
// idempotent). Spawns of an open run are redone when it is resumed.
func (c *Core) finishCutSpawns(placed []*loaded, existing placement.Existing) {
	for _, l := range placed {
		l.a.mu.Lock()
		todo := existing.CutSpawns(l.p.Spawns, l.p.Run)
		l.a.mu.Unlock()
		for _, sp := range todo {
			c.log.Warn("finishing a spawn a crash cut off", "parent", l.id, "child", sp.ChildID)
			c.respawn(l.a, sp)
		}
	}
}

// bootstrapUnstarted gives a spawned child whose bootstrap turn never
// started that turn now.
func (c *Core) bootstrapUnstarted(placed []*loaded) {
	for _, l := range placed {
		l.a.mu.Lock()
		needs := placement.NeedsBootstrap(l.p.ParentID, l.p.TurnNo, l.p.Run)
		l.a.mu.Unlock()
		if needs && !c.opts.NoWake {
			c.bootstrap(l.a)
		}
	}
}

// startScrub writes checkpoints for the logs recovery folded and verifies,
// in the background, the lines of resumed logs that recovery skipped;
// c.scrubbed closes when it is done (at once without checkpoints).
func (c *Core) startScrub(placed []*loaded) {
	if every := c.opts.CheckpointEvery; every > 0 {
		var scrub []*loaded
		for _, l := range placed {
			if l.resumed != nil {
				scrub = append(scrub, l)
			}
		}
		if !c.goBackground(func() {
			defer c.scrubOnce.Do(func() { close(c.scrubbed) })
			c.checkpointAll(1) // every log that recovery folded lines of
			c.scrub(scrub)
		}) {
			c.scrubOnce.Do(func() { close(c.scrubbed) })
		}
	} else {
		c.scrubOnce.Do(func() { close(c.scrubbed) })
	}
}

// pruneRecovered drops from the projections what only this recovery
// needed: sent envelopes their recipients have, or that can never be
// redelivered (to the user, to an agent that is gone) (Sent is kept so that a
// recovery can deliver a message that reached its sender's log but not its
// recipient's) and spawns whose child exists. What stays is what a later
// recovery may still need; it goes into the next checkpoint.
func (c *Core) pruneRecovered(placed []*loaded, existing placement.Existing) {
	for _, l := range placed {
		a := l.a
		a.mu.Lock()
		sent, spawns := a.p.Sent, a.p.Spawns
		a.mu.Unlock()
		var keepSent []sentRef
		for _, sr := range sent {
			id, to := sr.ID, sr.To
			r, ok := c.agent(to)
			if !ok {
				continue // the user, or an agent that is gone: never redelivered
			}
			r.mu.Lock()
			keep := r.corrupt != nil || !r.p.Enqueued.Has(id)
			r.mu.Unlock()
			if keep {
				keepSent = append(keepSent, sr)
			}
		}
		keepSpawns := existing.KeepSpawns(spawns)
		a.mu.Lock()
		// Entries applied meanwhile (respawns, bootstrap turns) stay.
		a.p.Sent = placement.Prune(a.p.Sent, len(sent), keepSent)
		a.p.Spawns = placement.Prune(a.p.Spawns, len(spawns), keepSpawns)
		a.mu.Unlock()
	}
}

// scrub checks, one log at a time, the lines that recovery skipped by
// starting from a checkpoint (an agent's first append checks them too, so
// nothing is appended on top of damage the scrub has not reached yet). An agent whose log fails is listed as
// corrupt from then on, as a full fold would have listed it, and its
// checkpoint is removed so that the next start folds (and reports) it.
func (c *Core) scrub(ls []*loaded) {
	for _, l := range ls {
		if c.stopping() {
			return
		}
		err := l.log.VerifyPrefix()
		if err == nil {
			continue
		}
		if !errors.Is(err, eventlog.ErrCorrupt) {
			c.log.Warn("scrub could not read a log", "agent", l.id, "err", err)
			continue
		}
		c.log.Error("agent log is damaged before its checkpoint; the agent is listed as corrupt", "agent", l.id, "err", err)
		l.a.mu.Lock()
		if l.a.corrupt == nil {
			l.a.corrupt = err
		}
		l.a.mu.Unlock()
		c.removeCheckpoint(l.id)
		c.changed.Fire()
	}
}

// stopping reports whether Close has begun.
func (c *Core) stopping() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// loader reads agents back from the store (package agentload); the
// binding is where the log's appends find the agent made of the result.
func (c *Core) loader() *agentload.Loader[**agent] {
	return &agentload.Loader[**agent]{
		FS: c.fs, Dir: c.agentDir, LogPath: c.logPath, Checkpoints: c.opts.CheckpointEvery >= 0,
		Open: func(id string, r *eventlog.Resume, replay func(eventlog.Entry) error) (store.Log, **agent, error) {
			target := new(*agent)
			lg, err := c.openLogReplay(id, target, r, replay)
			return lg, target, err
		},
		ReadSeq: c.st.ReadSeq, Sleep: c.opts.Sleep, Logger: c.log,
	}
}

// loadAll opens and folds the agent logs in parallel; with retry, the
// logs that cannot be opened for lack of a resource are retried first
// (agentload.RetryOpenFaults).
func (c *Core) loadAll(ids []string, retry bool) []*loaded {
	ld := c.loader()
	rs := ld.LoadAll(ids)
	if retry {
		ld.RetryOpenFaults(c.ctx, rs)
	}
	out := make([]*loaded, len(rs))
	for i, r := range rs {
		out[i] = c.adoptLoaded(r)
	}
	return out
}

// adoptLoaded makes the agent of a log read back, wired to the log's
// appends, before anything can append to it.
func (c *Core) adoptLoaded(r *agentload.Agent[**agent]) *loaded {
	l := &loaded{id: r.ID, log: r.Log, p: r.State, err: r.Err, missing: r.Missing, resumed: r.Resumed}
	if r.Log == nil {
		return l
	}
	l.a = newAgent(r.ID, r.Log, r.State)
	if r.Resumed != nil {
		l.a.ckptSeq.Store(r.Resumed.Seq)
	}
	*r.Binding = l.a
	return l
}

// placeTree adds agents to the tree, parents first, in the order
// placement.Order decides; it lists or terminates those it cannot place.
func (c *Core) placeTree(byID map[string]*loaded, rep *RecoveryReport) []*loaded {
	cands := make([]placement.Candidate, 0, len(byID))
	for _, l := range byID {
		cands = append(cands, placement.Candidate{ID: l.id, Parent: l.p.ParentID, Created: l.p.CreatedTS})
	}
	var placed []*loaded
	for _, st := range placement.Order(cands, c.parentsOf(cands)) {
		l := byID[st.ID]
		parent := l.p.ParentID
		switch st.Action {
		case placement.Terminate:
			c.terminateOrphanChild(l, rep)
			continue
		case placement.ParentQuarantined:
			// The parent may come back from quarantine: nothing irreversible.
			q := c.quarantinedAs(parent)
			c.log.Error("an agent's parent directory is in quarantine; the agent is listed as corrupt", "agent", l.id, "parent", parent, "quarantined_at", q)
			l.a.corrupt = fmt.Errorf("its parent %s is in quarantine (%s): restore that directory to %s and restart the daemon, or remove it",
				parent, q, c.agentDir(parent))
		case placement.ParentUnopened:
			// Not placeable now, and nothing wrong with it.
			cause := agentload.ErrUnopened // if the parent went meanwhile
			if pa, ok := c.agent(parent); ok && pa != nil {
				cause = pa.corrupt
			}
			c.log.Error("an agent's parent log could not be opened; the agent is listed with it", "agent", l.id, "parent", parent)
			l.a.corrupt = fmt.Errorf("its parent %s: %w", parent, cause)
		default:
			if err := c.tree.Add(l.id, l.p.Name, parent); err != nil {
				c.log.Error("agent cannot be placed in the tree; listed as corrupt", "agent", l.id, "err", err)
				l.a.corrupt = fmt.Errorf("cannot rebuild its place in the tree: %w", err)
				break
			}
			c.putAgent(l.id, l.a)
			placed = append(placed, l)
			continue
		}
		c.putAgent(l.id, l.a)
		rep.Corrupt++
	}
	return placed
}

// parentsOf describes, for placement.Order, the parents of the
// candidates as the Core knows them now.
func (c *Core) parentsOf(cands []placement.Candidate) map[string]placement.Parent {
	listed := map[string]*agent{}
	parents := map[string]placement.Parent{}
	c.mu.Lock()
	for _, cd := range cands {
		a, ok := c.agents[cd.Parent]
		if ok && a != nil {
			listed[cd.Parent] = a
		}
		parents[cd.Parent] = placement.Parent{Listed: ok, Quarantined: c.quarantine[cd.Parent] != ""}
	}
	c.mu.Unlock()
	for id, a := range listed { // c.mu and a.mu are never held together
		a.mu.Lock()
		p := parents[id]
		p.Unopened = errors.Is(a.corrupt, agentload.ErrUnopened)
		a.mu.Unlock()
		parents[id] = p
	}
	return parents
}

// terminateOrphanChild ends an agent whose parent is gone.
func (c *Core) terminateOrphanChild(l *loaded, rep *RecoveryReport) {
	c.log.Warn("terminating an agent whose parent is gone", "agent", l.id, "parent", l.p.ParentID)
	if _, err := l.log.Append(schema.AgentTerminated, schema.AgentTerminatedData{AgentID: l.id}); err != nil {
		c.log.Error("logging agent.terminated for an orphan child", "agent", l.id, "err", err)
	}
	_ = l.log.Close()
	c.mu.Lock()
	c.gone.Remember(l.id, l.p.Name, l.p.ParentID)
	c.mu.Unlock()
	rep.Terminated++
}

// restoreAgent finishes one placed agent: session.json, interrupted runs,
// live tokens.
func (c *Core) restoreAgent(l *loaded, rep *RecoveryReport) {
	a := l.a
	sess := agentload.Snapshot(c.store, c.fs, c.snapshotPath(l.id), l.id, l.p, c.now, c.log)
	a.snap.Set(sess)
	_ = atomicfile.CleanTemps(c.fs, c.agentDir(l.id))
	if lr := l.p.LastResume; lr != nil {
		// The consumed token answers a repeated resume after the restart.
		tok := token.Token{ID: lr.TokenID, AgentID: l.id, RunID: lr.RunID, SecretHash: lr.SecretHash,
			State: token.Consumed, Response: lr.Response}
		if err := c.tokens.Add(tok); err != nil {
			c.log.Warn("reinstalling a consumed resume token", "agent", l.id, "token", tok.ID, "err", err)
		}
	}
	r := l.p.Run
	if r == nil || r.Ended {
		return
	}
	if r.Wait != nil && r.Wait.TokenState == tokLive {
		tok := token.Token{ID: r.Wait.TokenID, AgentID: l.id, RunID: r.RunID, SecretHash: r.Wait.SecretHash,
			Deadline: r.Wait.Deadline, State: token.Live}
		if err := c.tokens.Add(tok); err != nil {
			c.log.Error("reinstalling a resume token", "agent", l.id, "token", tok.ID, "err", err)
		}
		return
	}
	a.mu.Lock()
	mark := session.NeedsRestartMark(a.snap.Get(), a.facts(), c.bootID)
	a.mu.Unlock()
	if mark {
		if _, err := l.log.Append(schema.RunInterrupted, schema.RunInterruptedData{RunID: r.RunID, Reason: schema.ReasonProcessRestart}); err != nil {
			c.log.Error("logging run.interrupted", "agent", l.id, "run", r.RunID, "err", err)
			return
		}
		rep.Interrupted++
	}
}

// liveSecret is the resume secret minted in a run, for the live run.waiting
// event.
func (c *Core) liveSecret(agentID, runID string) string {
	a, ok := c.agent(agentID)
	if !ok {
		return ""
	}
	return a.resumes.Secret(runID)
}
