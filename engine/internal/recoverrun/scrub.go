package recoverrun

import (
	"errors"

	"github.com/warren-dev/warren/eventlog"
)

// startScrub reads, in the background, the session.json files recovery
// left to read (package snapsave's Defer), then writes checkpoints for the
// logs recovery folded and verifies the lines of resumed logs that
// recovery skipped; Host.Scrubbed is told when it is done (or when the
// engine is closing).
func (r *Run[A]) startScrub(placed []*Agent[A]) {
	h := r.Host
	var resumed []*Agent[A]
	for _, l := range placed {
		if l.Resumed != nil {
			resumed = append(resumed, l)
		}
	}
	if !h.Background(func() {
		defer h.Scrubbed()
		for _, l := range placed {
			if h.Stopping() {
				return
			}
			h.LoadSnapshot(l)
		}
		if !r.Checkpoints {
			return
		}
		h.CheckpointAll() // every log that recovery folded lines of
		r.scrub(resumed)
	}) {
		h.Scrubbed()
	}
}

// scrub checks, one log at a time, the lines that recovery skipped by
// starting from a checkpoint (an agent's first append checks them too, so
// nothing is appended on top of damage the scrub has not reached yet). An
// agent whose log fails is listed as corrupt from then on, as a full fold
// would have listed it, and its checkpoint is removed so that the next
// start folds (and reports) it.
func (r *Run[A]) scrub(ls []*Agent[A]) {
	h := r.Host
	for _, l := range ls {
		if h.Stopping() {
			return
		}
		err := l.Log.VerifyPrefix()
		if err == nil {
			continue
		}
		if !errors.Is(err, eventlog.ErrCorrupt) {
			r.Logger.Warn("scrub could not read a log", "agent", l.ID, "err", err)
			continue
		}
		r.Logger.Error("agent log is damaged before its checkpoint; the agent is listed as corrupt", "agent", l.ID, "err", err)
		l.Agent.MarkCorrupt(err)
		h.RemoveCheckpoint(l.ID)
		h.Changed()
	}
}
