package engine

import (
	"context"
	"sort"
	"strconv"

	"github.com/warren-dev/warren/config"
	"github.com/warren-dev/warren/engine/internal/notice"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/tree"
)

// Resuming interrupted work (SPEC 4): a run is never lost to a stop or a
// crash. After recovery and after a takeover, and when a wait times out,
// every interrupted run whose provider entry's resume policy is auto
// (config.ResumePolicy) is re-run (run.resumed, by auto), within pool
// slots: a re-run waits for a slot like any turn. A run the policy
// re-ran 3 times and that was interrupted again is left for the
// operator (a crash loop must not spin), as are the runs of entries
// whose policy is manual. After a start that found interrupted runs, the
// USER inbox gets one message from SYSTEM listing them, what was re-run
// and the command for the rest; daemon.status keeps the same summary
// (Interrupted) for `warren daemon start` to print.
//
// An agent whose run is interrupted takes no wake turn (agent.TakeWake):
// the messages the run's turn.start took stay the run's until it is
// re-run (which consumes them) or cancelled (which gives them back).

// maxAutoResumes is how many times the resume policy re-runs one run.
const maxAutoResumes = 3

// InterruptedRun is a run a start (or a timed-out wait) found
// interrupted, and what became of it.
type InterruptedRun struct {
	AgentID, Path, RunID, Reason string
	// Rerun: the resume policy re-ran it; else Left says why it waits for
	// the operator (`warren agent resume`).
	Rerun bool
	Left  string
	seq   uint64 // the run.interrupted's seq
}

// Interrupted is what the last recovery found interrupted (nil when
// nothing was), for daemon.status.
func (c *Core) Interrupted() []InterruptedRun {
	c.resumedMu.Lock()
	defer c.resumedMu.Unlock()
	return append([]InterruptedRun(nil), c.resumed...)
}

// autoResume re-runs, under the resume policy, the interrupted runs of
// agents, and says what it did with each interrupted run.
func (c *Core) autoResume(agents []*agent) []InterruptedRun {
	cfg := c.config()
	var out []InterruptedRun
	for _, a := range agents {
		run := a.WaitState().Run
		if !interrupted(run) {
			continue
		}
		r := InterruptedRun{AgentID: a.ID(), Path: c.Path(a.ID()), RunID: run.RunID, Reason: run.Reason, seq: run.InterruptSeq}
		switch {
		case c.opts.NoWake:
			r.Left = "this daemon runs no automatic turns"
		case cfg.ResumePolicyFor(run.Provider, hasWorkspace(a)) != config.ResumeAuto:
			r.Left = "the resume policy of " + run.Provider + " is manual"
		case run.AutoResumes >= maxAutoResumes:
			r.Left = "re-run 3 times by the resume policy and interrupted again each time"
		default:
			if _, err := c.startRerun(a, run, schema.ByAuto, false); err != nil {
				r.Left = err.Error()
			} else {
				r.Rerun = true
			}
		}
		if !r.Rerun {
			c.log.Warn("an interrupted run is left for the operator", "agent", a.ID(), "run", run.RunID, "why", r.Left)
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// hasWorkspace reports whether a has an open workspace.
func hasWorkspace(a *agent) bool {
	_, ok := a.OpenWorkspace()
	return ok
}

// resumeAfterStart runs autoResume over the agents a recovery (or a
// takeover) placed, keeps the summary for daemon.status and tells USER.
func (c *Core) resumeAfterStart(agents []*agent) {
	runs := c.autoResume(agents)
	if len(runs) == 0 {
		return
	}
	c.resumedMu.Lock()
	c.resumed = append(c.resumed, runs...)
	c.resumedMu.Unlock()
	list := make([]notice.Interrupted, len(runs))
	for i, r := range runs {
		list[i] = notice.Interrupted{Path: r.Path, RunID: r.RunID, Reason: r.Reason, Rerun: r.Rerun, Left: r.Left}
	}
	m := c.newMessage(resumedNoticeID(runs), tree.System, tree.User, inbox.KindNotification, notice.Resumed(list))
	if err := c.enqueue(m); err != nil {
		c.log.Error("telling USER which runs were interrupted", "err", err)
	}
}

// resumedNoticeID names the notice about runs by the interruptions and
// what became of them, so that a start that finds the same (a recovery
// run twice) sends it once.
func resumedNoticeID(runs []InterruptedRun) string {
	parts := []string{"interrupted"}
	for _, r := range runs {
		parts = append(parts, r.RunID, strconv.FormatUint(r.seq, 10), strconv.FormatBool(r.Rerun))
	}
	return notice.ID(parts...)
}

// ResumeTree re-runs the interrupted runs of agentID's subtree (all: of
// the whole tree; agentID may then be empty), as the operator, and
// returns at once with what it started and what it could not.
func (c *Core) ResumeTree(ctx context.Context, agentID string, all bool) ([]InterruptedRun, error) {
	var agents []*agent
	if all {
		agents = c.agentList()
	} else {
		root, ok := c.agent(agentID)
		if !ok {
			return nil, notFound(agentID)
		}
		for _, id := range c.tree.Subtree(root.ID()) {
			if a, ok := c.agent(id); ok {
				agents = append(agents, a)
			}
		}
	}
	var out []InterruptedRun
	for _, a := range agents {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		run := a.WaitState().Run
		if !interrupted(run) {
			continue
		}
		r := InterruptedRun{AgentID: a.ID(), Path: c.Path(a.ID()), RunID: run.RunID, Reason: run.Reason}
		if _, err := c.startRerun(a, run, schema.ByOperator, false); err != nil {
			r.Left = err.Error()
		} else {
			r.Rerun = true
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}
