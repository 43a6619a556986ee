package engine

import (
	"errors"
	"io/fs"
	"path/filepath"

	"github.com/warren-dev/warren/checkpoint"
	"github.com/warren-dev/warren/eventlog"
)

// Checkpoints (package checkpoint): the projection of a log up to a line,
// so that recovery folds only the lines written since.

// writeCheckpoint writes the agent's checkpoint when its log has grown by
// at least min entries since the last one. It is an optimisation: a
// checkpoint that is lost, stale or torn makes recovery fold the whole log,
// so it is written without fsync (temp file and rename). On a cluster
// store none is written: its line is checked in the local file, which a
// cluster home does not have, and the agent may be recovered by another
// daemon, in another home (recovery there folds the whole log).
func (c *Core) writeCheckpoint(a *agent, min uint64) {
	if c.clustered() {
		return
	}
	a.Ckpt.Mu.Lock()
	defer a.Ckpt.Mu.Unlock()
	seq, off, state, due, err := a.CheckpointState(min)
	if !due {
		return
	}
	if err != nil {
		c.log.Debug("no checkpoint for now", "agent", a.ID(), "err", err)
		return
	}
	c.ckptSlots <- struct{}{}
	defer func() { <-c.ckptSlots }()
	r, err := eventlog.ResumeAt(c.fs, c.logPath(a.ID()), seq, off)
	if err != nil {
		c.log.Warn("no checkpoint: its line does not check out", "agent", a.ID(), "seq", seq, "err", err)
		return
	}
	if err := checkpoint.Write(c.fs, c.agentDir(a.ID()), state, r); err != nil {
		c.log.Warn("writing a checkpoint", "agent", a.ID(), "err", err)
		return
	}
	a.Ckpt.Seq.Store(seq)
}

// checkpointSoon has the agent's checkpoint written, at its log's end
// then, once SessionSaveDelay has passed (a timer of the scheduler, so
// Close cancels it or waits for it; Close then writes every checkpoint
// itself). At most one is armed per agent: a log that keeps growing (a
// message storm to a gated agent, a long turn) gets one checkpoint per
// delay, not one per entry. The commits of an agent's log ask for one when
// the log has grown enough (the record's ApplyCommitted: by any entry at rest, by
// CheckpointEvery while a turn runs, so that a long turn is not
// checkpointed every delay), and so does the end of a turn, once the agent
// is at rest: its last entries were logged while it was busy. A timer that
// comes due while the agent is busy again writes all the same: a kill -9
// then leaves to fold, in any log, what it grew by in the last delay and,
// in the logs of the turns running, fewer than CheckpointEvery entries
// more.
func (c *Core) checkpointSoon(a *agent) {
	if c.opts.CheckpointEvery <= 0 || c.clustered() || !a.Ckpt.Armed.CompareAndSwap(false, true) {
		return
	}
	armed := c.sched.After(max(c.opts.SessionSaveDelay, 0), func() {
		a.Ckpt.Armed.Store(false)
		c.writeCheckpoint(a, 1)
	})
	if !armed { // the core is closing: Close writes the checkpoints
		a.Ckpt.Armed.Store(false)
	}
}

// removeCheckpoint removes an agent's checkpoint (its log failed a check).
func (c *Core) removeCheckpoint(id string) {
	err := c.fs.Remove(filepath.Join(c.agentDir(id), checkpoint.Name))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		c.log.Warn("removing a checkpoint", "agent", id, "err", err)
	}
}

// checkpointAll writes the checkpoint of every agent whose log grew by at
// least min entries since its last one, until Close begins (Close writes
// its own).
func (c *Core) checkpointAll(min uint64) {
	c.checkpointAgents(c.agentList(), min, true)
}

// checkpointAgents writes the checkpoints of agents whose logs grew by at
// least min entries; untilStop stops it when Close begins.
func (c *Core) checkpointAgents(agents []*agent, min uint64, untilStop bool) {
	for _, a := range agents {
		if untilStop && c.stopping() {
			return
		}
		c.writeCheckpoint(a, min)
	}
}
