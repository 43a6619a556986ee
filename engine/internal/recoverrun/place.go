package recoverrun

import (
	"fmt"

	"github.com/warren-dev/warren/atomicfile"
	"github.com/warren-dev/warren/engine/internal/placement"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/token"
)

// place adds the live agents to the tree, parents first, in the order
// placement.Order decides; it lists or terminates those it cannot place,
// and returns those it placed, in order.
func (r *Run[A]) place(live map[string]*Agent[A], rep *Report) []*Agent[A] {
	h := r.Host
	cands := make([]placement.Candidate, 0, len(live))
	for _, l := range live {
		cands = append(cands, placement.Candidate{ID: l.ID, Parent: l.State.ParentID, Created: l.State.CreatedTS})
	}
	var placed []*Agent[A]
	for _, st := range placement.Order(cands, h.Parents(cands)) {
		l := live[st.ID]
		parent := l.State.ParentID
		var cause error
		switch st.Action {
		case placement.Terminate:
			r.terminateOrphan(l, rep)
			continue
		case placement.ParentQuarantined:
			// The parent may come back from quarantine: nothing irreversible.
			q := h.QuarantinedAs(parent)
			r.Logger.Error("an agent's parent directory is in quarantine; the agent is listed as corrupt", "agent", l.ID, "parent", parent, "quarantined_at", q)
			cause = fmt.Errorf("its parent %s is in quarantine (%s): restore that directory to %s and restart the daemon, or remove it",
				parent, q, r.Dir(parent))
		case placement.ParentUnopened:
			// Not placeable now, and nothing wrong with it.
			pc := h.ParentCause(parent)
			r.Logger.Error("an agent's parent log could not be opened; the agent is listed with it", "agent", l.ID, "parent", parent)
			cause = fmt.Errorf("its parent %s: %w", parent, pc)
		default:
			if err := h.AddToTree(l); err != nil {
				r.Logger.Error("agent cannot be placed in the tree; listed as corrupt", "agent", l.ID, "err", err)
				cause = fmt.Errorf("cannot rebuild its place in the tree: %w", err)
				break
			}
			h.List(l, nil)
			placed = append(placed, l)
			continue
		}
		h.List(l, cause)
		rep.Corrupt++
	}
	return placed
}

// terminateOrphan ends an agent whose parent is gone.
func (r *Run[A]) terminateOrphan(l *Agent[A], rep *Report) {
	r.Logger.Warn("terminating an agent whose parent is gone", "agent", l.ID, "parent", l.State.ParentID)
	if _, err := l.Log.Append(schema.AgentTerminated, schema.AgentTerminatedData{AgentID: l.ID}); err != nil {
		r.Logger.Error("logging agent.terminated for an orphan child", "agent", l.ID, "err", err)
	}
	_ = l.Log.Close()
	r.Host.Forget(l)
	rep.Terminated++
}

// restore finishes one agent read back: session.json, temporary files,
// the resume tokens, and its open run marked interrupted when a previous
// start was running it (not when it waits on a live token).
func (r *Run[A]) restore(l *Agent[A], rep *Report) {
	h := r.Host
	h.Snapshot(l)
	_ = atomicfile.CleanTemps(r.FS, r.Dir(l.ID))
	if lr := l.State.LastResume; lr != nil {
		// The consumed token answers a repeated resume after the restart.
		tok := token.Token{ID: lr.TokenID, AgentID: l.ID, RunID: lr.RunID, SecretHash: lr.SecretHash,
			State: token.Consumed, Response: lr.Response}
		if err := h.AddToken(tok); err != nil {
			r.Logger.Warn("reinstalling a consumed resume token", "agent", l.ID, "token", tok.ID, "err", err)
		}
	}
	run := l.State.Run
	if run == nil || run.Ended {
		return
	}
	if run.Wait != nil && run.Wait.TokenState == string(schema.TokLive) {
		tok := token.Token{ID: run.Wait.TokenID, AgentID: l.ID, RunID: run.RunID, SecretHash: run.Wait.SecretHash,
			Deadline: run.Wait.Deadline, State: token.Live}
		if err := h.AddToken(tok); err != nil {
			r.Logger.Error("reinstalling a resume token", "agent", l.ID, "token", tok.ID, "err", err)
		}
		return
	}
	if !l.Agent.NeedsRestartMark(r.BootID) {
		return
	}
	if _, err := l.Log.Append(schema.RunInterrupted, schema.RunInterruptedData{RunID: run.RunID, Reason: schema.ReasonProcessRestart}); err != nil {
		r.Logger.Error("logging run.interrupted", "agent", l.ID, "run", run.RunID, "err", err)
		return
	}
	rep.Interrupted++
}
