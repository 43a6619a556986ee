package engine

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/checkpoint"
	"github.com/warren-dev/warren/store"
)

// When and how the engine writes each agent's
// checkpoint (package checkpoint holds the format; engine/doc.go,
// "Checkpoints", why they exist): soon after the log grew (Soon, one
// scheduler timer at a time per agent), for every agent after recovery
// and at Close (All), and on demand (Write); and removed when the log
// fails a check (Remove).
//
// A checkpoint is an optimisation: one that is lost, stale or torn makes
// recovery fold the whole log, so it is written without fsync (a temp
// file and a rename). On a cluster store none is written (ckptOptions.Off):
// its line is checked in the local log file, which a cluster home does
// not have, and the agent may be recovered by another daemon in another
// home, which folds the whole log.
//
// # Locks
//
// Write holds the agent's Ckpt.Mu (one write per agent at a time), takes
// the record's lock briefly to copy its state (CheckpointState) and holds
// one of the ckptWriter's slots while it reads the log's line and writes the
// file, so that one write runs at a time (each opens a file of its own,
// outside the open-logs cap). No lock is held across ckptOptions.After.

// ckptOptions configures a ckptWriter.
type ckptOptions struct {
	// Store is where checkpoints go (ckptstore.go); Ctx bounds its
	// requests (the Core's).
	Store store.Checkpoints
	Ctx   context.Context
	// Every is CoreOptions.CheckpointEvery: how many entries a busy
	// agent's log grows by before Soon is asked (the record decides,
	// ApplyCommitted); 0 or negative turns Soon and All off.
	Every int
	// Delay is how long after Soon the write happens
	// (CoreOptions.SessionSaveDelay; 0 or negative: at once).
	Delay time.Duration
	// After runs f after d as work the engine's Close cancels or waits
	// for; false when the engine is closing (f will not run).
	After func(d time.Duration, f func()) bool
	// Stopping reports that Close has begun (All stops then).
	Stopping func() bool
	Logger   hclog.Logger
}

// ckptWriter writes checkpoints. Make one with newCkptWriter.
type ckptWriter struct {
	o     ckptOptions
	slots chan struct{}
}

// newCkptWriter returns a ckptWriter.
func newCkptWriter(o ckptOptions) *ckptWriter {
	return &ckptWriter{o: o, slots: make(chan struct{}, 1)}
}

// Write writes a's checkpoint, at its log's end, when the log has grown
// by at least min entries since the last one.
// The error, logged here, is returned for All: a store that does not
// answer (store.ErrUnavailable) stops it.
func (w *ckptWriter) Write(a *agent, min uint64) error {
	a.Ckpt.Mu.Lock()
	defer a.Ckpt.Mu.Unlock()
	seq, off, state, due, err := a.CheckpointState(min)
	if !due {
		return nil
	}
	if err != nil {
		w.o.Logger.Debug("no checkpoint for now", "agent", a.ID(), "err", err)
		return nil
	}
	w.slots <- struct{}{}
	defer func() { <-w.slots }()
	r, err := w.o.Store.ResumeAt(w.o.Ctx, a.ID(), seq, off)
	if err != nil {
		w.o.Logger.Warn("no checkpoint: its line does not check out", "agent", a.ID(), "seq", seq, "err", err)
		return err
	}
	if err := w.o.Store.Save(w.o.Ctx, a.ID(), checkpoint.Encode(state, r)); err != nil {
		w.o.Logger.Warn("writing a checkpoint", "agent", a.ID(), "err", err)
		return err
	}
	a.Ckpt.Seq.Store(seq)
	return nil
}

// Soon has a's checkpoint written, at its log's end then, once Delay has
// passed. At most one is armed per agent: a log that keeps growing (a
// message storm to a gated agent, a long turn) gets one checkpoint per
// delay, not one per entry. The commits of an agent's log ask for one when
// the log has grown enough (the record's ApplyCommitted: by any entry at
// rest, by Every while a turn runs, so that a long turn is not
// checkpointed every delay), and so does the end of a turn, once the agent
// is at rest: its last entries were logged while it was busy. A timer that
// comes due while the agent is busy again writes all the same: a kill -9
// then leaves to fold, in any log, what it grew by in the last delay and,
// in the logs of the turns running, fewer than Every entries more.
func (w *ckptWriter) Soon(a *agent) {
	if w.o.Every <= 0 || !a.Ckpt.Armed.CompareAndSwap(false, true) {
		return
	}
	armed := w.o.After(max(w.o.Delay, 0), func() {
		a.Ckpt.Armed.Store(false)
		_ = w.Write(a, 1) // logged by Write
	})
	if !armed { // the engine is closing: Close writes the checkpoints
		a.Ckpt.Armed.Store(false)
	}
}

// All writes the checkpoints of agents whose logs grew by at least min
// entries, unless checkpoints are off (Every 0 or negative); untilStop
// stops it when Close begins (Close writes its own).
func (w *ckptWriter) All(agents []*agent, min uint64, untilStop bool) {
	if w.o.Every <= 0 {
		return
	}
	for _, a := range agents {
		if untilStop && w.o.Stopping() {
			return
		}
		if err := w.Write(a, min); errors.Is(err, store.ErrUnavailable) {
			// A cluster that does not answer: the next checkpoints would
			// each wait out the store's timeout (a stop would take
			// minutes); recovery folds what they would have saved.
			w.o.Logger.Warn("the store does not answer; the other checkpoints are left for later", "err", err)
			return
		}
	}
}

// Remove removes an agent's checkpoint (its log failed a check).
func (w *ckptWriter) Remove(id string) {
	if err := w.o.Store.Remove(w.o.Ctx, id); err != nil {
		w.o.Logger.Warn("removing a checkpoint", "agent", id, "err", err)
	}
}
