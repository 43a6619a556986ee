package engine

import (
	"github.com/warren-dev/warren/engine/internal/agentload"
	"github.com/warren-dev/warren/engine/internal/recoverrun"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/store"
)

// Recovery's steps, in their order, are package recoverrun's (Run.Recover
// and Run.Takeover); the engine does each step on its agents, under its
// locks, through recoveryHost (recovery_host.go).

// RecoveryReport summarises what a recovery did.
type RecoveryReport = recoverrun.Report

// loaded is one agent directory read back from disk.
type loaded = recoverrun.Agent[*agent]

// Recover rebuilds every agent from the logs: WAL replay and torn-tail
// repair, orphan cleanup, the tree, inboxes, gates, subscriptions,
// reminders, interrupted runs and waits. It wakes agents with pending
// messages at the end (unless NoWake).
func (c *Core) Recover() (RecoveryReport, error) { return c.recoveryRun().Recover() }

// recoveryRun is a recovery of this core.
func (c *Core) recoveryRun() *recoverrun.Run[*agent] {
	return &recoverrun.Run[*agent]{Host: recoveryHost{c}, FS: c.fs, Home: c.opts.Home, Dir: c.agentDir, Now: c.now, BootID: c.bootID,
		Clustered: c.clustered(), Checkpoints: c.opts.CheckpointEvery > 0, Every: c.opts.TakeoverEvery, Logger: c.log}
}

// stopping reports whether Close has begun.
func (c *Core) stopping() bool { return c.agents.Closed() }

// loader reads agents back from the store (package agentload); the
// binding is where the log's appends find the agent made of the result.
func (c *Core) loader() *agentload.Loader[**agent] {
	return &agentload.Loader[**agent]{
		FS: c.fs, Dir: c.agentDir, LogPath: c.logPath, Checkpoints: c.opts.CheckpointEvery > 0,
		Open: func(id string, r *eventlog.Resume, replay func(eventlog.Entry) error) (store.Log, **agent, error) {
			target := new(*agent)
			lg, err := c.openLogReplay(c.ctx, id, target, r, replay)
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
	l := &loaded{ID: r.ID, Log: r.Log, State: r.State, Err: r.Err, Missing: r.Missing, Resumed: r.Resumed}
	if r.Log == nil {
		return l
	}
	l.Agent = newAgent(r.ID, r.Log, r.State)
	if r.Resumed != nil && r.Resumed.Len > 0 {
		// A checkpoint without its line's length (an older build's) counts
		// as none: the checkpoints after recovery write it again, once.
		l.Agent.Ckpt.Seq.Store(r.Resumed.Seq)
	}
	*r.Binding = l.Agent
	return l
}

// liveSecret is the resume secret minted in a run, for the live run.waiting
// event.
func (c *Core) liveSecret(agentID, runID string) string {
	a, ok := c.agent(agentID)
	if !ok {
		return ""
	}
	return a.Resumes().Secret(runID)
}

// Quarantined is how many agent directories <home>/quarantine held at the
// last recovery (including those it moved there).
func (c *Core) Quarantined() int { return c.agents.Quarantined() }
