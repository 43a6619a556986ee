package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/schema"
	"strings"
)

// mObsAgent is one live agent as the model test observes it.
type mObsAgent struct {
	id      string
	path    string
	parent  string // the parent's path; "" for a root
	gated   bool
	held    bool
	pending []string // payloads of the live inbox, in order
	counts  mLogCounts
}

// mLogCounts counts entries of an agent's log.
type mLogCounts struct {
	calls   int // tool.call
	turns   int // turn.complete
	fails   int // turn.failed
	retries int // turn.retry
}

// mObservation is the system after a command: the live tree in List order
// with each agent's gate and inbox, the USER inbox, and the disagreements
// found between each agent's log and its live state.
type mObservation struct {
	agents   []mObsAgent
	user     []string
	problems []string
}

// observe snapshots the live tree and inboxes and runs the log oracle on
// every agent.
func (s *mSUT) observe() mObservation {
	c := s.h.c
	views := c.List()
	pathOf := make(map[string]string, len(views))
	for _, v := range views {
		pathOf[v.ID] = v.Path
	}
	var o mObservation
	for _, v := range views {
		a, ok := c.agent(v.ID)
		if !ok {
			o.problems = append(o.problems, fmt.Sprintf("%s: listed but not an agent of the core", v.Path))
			continue
		}
		var gated, held bool
		var live []inbox.Message
		a.View(func(p *projection, l liveFlags) { gated, held, live = p.Gated, l.Held, p.Pending.Peek() })
		ob := mObsAgent{id: v.ID, path: v.Path, gated: gated, held: held}
		if v.ParentID != "" {
			if ob.parent = pathOf[v.ParentID]; ob.parent == "" {
				ob.parent = "<unlisted " + v.ParentID + ">"
			}
		}
		ids := make([]string, len(live))
		for i, m := range live {
			ids[i] = m.ID
			ob.pending = append(ob.pending, mNormalize(m.Payload))
		}
		if v.Pending != len(live) {
			o.problems = append(o.problems, fmt.Sprintf("%s: agent.list shows %d pending, the inbox holds %d", v.Path, v.Pending, len(live)))
		}
		var problems []string
		ob.counts, problems = s.logOracle(v, ids)
		o.agents = append(o.agents, ob)
		o.problems = append(o.problems, problems...)
	}
	for _, m := range c.UserPending(context.Background()) {
		o.user = append(o.user, m.Payload)
	}
	return o
}

// logOracle recomputes an agent's inbox from its log alone: the ids of
// message.enqueued, minus those of message.delivered, minus the
// message_ids of every turn.start whose run has a turn.complete. It reports
// a message consumed twice or consumed without being enqueued, an inbox
// that differs from the live one (liveIDs, in order), and an agent.created
// that disagrees with the tree, a turn that started but did not end
// (every command ends with all turns done) and, for a spawned child, a
// first turn that is not its one bootstrap turn. It also counts entries.
func (s *mSUT) logOracle(v AgentView, liveIDs []string) (n mLogCounts, problems []string) {
	es, err := eventlog.ReadAll(s.h.fs, s.h.c.logPath(v.ID))
	if err != nil {
		return n, []string{fmt.Sprintf("%s: reading its log: %v", v.Path, err)}
	}
	bad := func(format string, args ...any) {
		problems = append(problems, v.Path+": "+fmt.Sprintf(format, args...))
	}
	var enqueued []string
	seen := map[string]bool{}
	runMsgs := map[string][]string{}
	consumedBy := map[string]string{}
	consume := func(id, by string) {
		if prev, dup := consumedBy[id]; dup {
			bad("message %s consumed twice (%s, then %s)", id, prev, by)
		}
		if !seen[id] {
			bad("message %s consumed by %s but never enqueued before it", id, by)
		}
		consumedBy[id] = by
	}
	created, starts, bootstraps := 0, 0, 0
	for _, e := range es {
		switch e.Event {
		case schema.ToolCall:
			n.calls++
		case schema.TurnFailed:
			n.fails++
		case schema.TurnRetry:
			n.retries++
		case schema.AgentCreated:
			created++
			var d schema.AgentCreatedData
			if err := json.Unmarshal(e.Data, &d); err != nil {
				bad("agent.created at seq %d: %v", e.Seq, err)
				continue
			}
			parent := ""
			if d.ParentID != nil {
				parent = *d.ParentID
			}
			if d.AgentID != v.ID || d.Name != v.Name || parent != v.ParentID {
				bad("agent.created says id %s name %q parent %q; the tree says id %s name %q parent %q",
					d.AgentID, d.Name, parent, v.ID, v.Name, v.ParentID)
			}
		case schema.MessageEnqueued:
			var d struct {
				ID        string `json:"message_id"`
				Recipient string `json:"recipient"`
			}
			if err := json.Unmarshal(e.Data, &d); err != nil {
				bad("message.enqueued at seq %d: %v", e.Seq, err)
				continue
			}
			if seen[d.ID] {
				bad("message %s enqueued twice (seq %d)", d.ID, e.Seq)
				continue
			}
			if d.Recipient != v.ID {
				bad("message %s in its log is addressed to %s", d.ID, d.Recipient)
			}
			seen[d.ID] = true
			enqueued = append(enqueued, d.ID)
		case schema.MessageDelivered:
			var d schema.MessageDeliveredData
			if err := json.Unmarshal(e.Data, &d); err != nil {
				bad("message.delivered at seq %d: %v", e.Seq, err)
				continue
			}
			consume(d.MessageID, fmt.Sprintf("message.delivered seq %d", e.Seq))
		case schema.TurnStart:
			var d schema.TurnStartData
			if err := json.Unmarshal(e.Data, &d); err != nil {
				bad("turn.start at seq %d: %v", e.Seq, err)
				continue
			}
			runMsgs[d.RunID] = d.MessageIDs
			starts++
			if d.Prompt == bootstrapPrompt {
				bootstraps++
				if starts != 1 {
					bad("a bootstrap turn is its turn %d, want its first", starts)
				}
			}
		case schema.TurnComplete:
			n.turns++
			var d schema.TurnCompleteData
			if err := json.Unmarshal(e.Data, &d); err != nil {
				bad("turn.complete at seq %d: %v", e.Seq, err)
				continue
			}
			for _, id := range runMsgs[d.RunID] {
				consume(id, fmt.Sprintf("run %s completed at seq %d", d.RunID, e.Seq))
			}
			delete(runMsgs, d.RunID)
		}
	}
	if created != 1 {
		bad("its log has %d agent.created entries, want 1", created)
	}
	if starts != n.turns+n.fails {
		bad("%d turn.start but %d turn.complete and %d turn.failed: every turn must have ended", starts, n.turns, n.fails)
	}
	wantBoot := 0
	if v.ParentID != "" {
		wantBoot = 1
	}
	if bootstraps != wantBoot {
		bad("%d bootstrap turns, want %d (one for a spawned child, none for a root)", bootstraps, wantBoot)
	}
	var fromLog []string
	for _, id := range enqueued {
		if _, gone := consumedBy[id]; !gone {
			fromLog = append(fromLog, id)
		}
	}
	if strings.Join(fromLog, ",") != strings.Join(liveIDs, ",") {
		bad("inbox from the log alone %v, live inbox %v", fromLog, liveIDs)
	}
	return n, problems
}

// mCompareObservation lists the differences between the model and what was
// observed.
func mCompareObservation(s *mState, o mObservation) []string {
	bad := append([]string(nil), o.problems...)
	order := s.preorder()
	var want, got []string
	for _, i := range order {
		a := s.agents[i]
		want = append(want, fmt.Sprintf("%s<-%q", a.path, a.parent))
	}
	for _, a := range o.agents {
		got = append(got, fmt.Sprintf("%s<-%q", a.path, a.parent))
	}
	if strings.Join(want, " ") != strings.Join(got, " ") {
		bad = append(bad, fmt.Sprintf("tree (path<-parent, List order) %v, model %v", got, want))
		return bad
	}
	byPath := make(map[string]mObsAgent, len(o.agents))
	for _, a := range o.agents {
		byPath[a.path] = a
	}
	for _, i := range order {
		m := s.agents[i]
		a := byPath[m.path]
		if m.gated != a.gated {
			bad = append(bad, fmt.Sprintf("%s: gated=%v, model %v", a.path, a.gated, m.gated))
		}
		if fmt.Sprintf("%q", m.pending) != fmt.Sprintf("%q", a.pending) {
			bad = append(bad, fmt.Sprintf("%s: inbox %q, model %q", a.path, a.pending, m.pending))
		}
		if want := (mLogCounts{m.calls, m.turns, m.fails, m.retries}); want != a.counts {
			bad = append(bad, fmt.Sprintf("%s: log has %+v, model %+v", a.path, a.counts, want))
		}
		if m.held != a.held {
			bad = append(bad, fmt.Sprintf("%s: held=%v (no wake after a failed turn), model %v", a.path, a.held, m.held))
		}
	}
	if fmt.Sprintf("%q", s.user) != fmt.Sprintf("%q", o.user) {
		bad = append(bad, fmt.Sprintf("USER inbox %q, model %q", o.user, s.user))
	}
	return bad
}
