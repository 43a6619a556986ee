package engine

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/warren-dev/warren/engine/internal/gone"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/session"
)

// Terminate terminates a leaf agent that runs no turn.
func (c *Core) Terminate(agentID string) error {
	a, ok := c.agent(agentID)
	if !ok {
		return notFound(agentID)
	}
	a.mu.Lock()
	busy := a.busy
	a.mu.Unlock()
	if busy {
		return failf(ErrWrongState, "agent %s is mid-turn; cancel it first (warren agent cancel)", a.name())
	}
	return c.terminate(a)
}

// TerminatedAgent is one agent agent.terminate terminated: its id and the
// path it had.
type TerminatedAgent struct{ ID, Path string }

// TerminateTree terminates agentID and all its descendants, deepest first
// (agent.terminate with recursive). When one of them is mid-turn nothing is
// terminated. It returns the terminated agents in order; an error part way
// says which were terminated already.
func (c *Core) TerminateTree(agentID string) ([]TerminatedAgent, error) {
	if _, ok := c.agent(agentID); !ok {
		return nil, notFound(agentID)
	}
	order := c.subtreeDeepestFirst(agentID)
	var busy []string
	for _, id := range order {
		if a, ok := c.agent(id); ok {
			a.mu.Lock()
			if a.busy {
				busy = append(busy, c.tree.Path(id))
			}
			a.mu.Unlock()
		}
	}
	if len(busy) > 0 {
		verb := "are"
		if len(busy) == 1 {
			verb = "is"
		}
		return nil, failf(ErrWrongState, "nothing was terminated: %s %s mid-turn; cancel first (warren agent cancel REF), then terminate again",
			strings.Join(busy, ", "), verb)
	}
	done := make([]TerminatedAgent, 0, len(order))
	for _, id := range order {
		a, ok := c.agent(id)
		if !ok {
			continue // terminated meanwhile
		}
		path := c.tree.Path(id)
		err := c.Terminate(id)
		if err != nil {
			names := make([]string, len(done))
			for i, d := range done {
				names[i] = d.Path
			}
			if len(names) == 0 {
				return nil, err
			}
			return nil, fmt.Errorf("terminating %s: %w (already terminated: %s)", a.name(), err, strings.Join(names, ", "))
		}
		done = append(done, TerminatedAgent{ID: id, Path: path})
	}
	return done, nil
}

// subtreeDeepestFirst lists id and its descendants, each agent after all
// of its own descendants (id last).
func (c *Core) subtreeDeepestFirst(id string) []string {
	type frame struct {
		id       string
		expanded bool
	}
	var out []string
	stack := []frame{{id: id}}
	for len(stack) > 0 {
		f := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if f.expanded {
			out = append(out, f.id)
			continue
		}
		stack = append(stack, frame{id: f.id, expanded: true})
		kids := c.tree.Children(f.id)
		for i := len(kids) - 1; i >= 0; i-- {
			stack = append(stack, frame{id: kids[i]})
		}
	}
	return out
}

// goneInfoOf is what agent.list (all) shows of a just terminated agent.
func goneInfoOf(a *agent, ended time.Time) *gone.Info {
	a.mu.Lock()
	defer a.mu.Unlock()
	in := &gone.Info{Provider: a.p.Provider, Model: a.p.Model, CreatedAt: a.p.CreatedTS, TerminatedAt: ended, Usage: a.p.Usage}
	if a.p.Run != nil {
		in.LastTurnAt = a.p.Run.StartedAt
	}
	return in
}

// terminate logs agent.terminated and drops the agent from the tree, the
// pools and the subscription index.
func (c *Core) terminate(a *agent) error {
	if n := len(c.tree.Children(a.id)); n > 0 {
		kids, them := "children", "them"
		if n == 1 {
			kids, them = "child", "it"
		}
		return failf(ErrWrongState, "agent %s has %d %s; terminate %s first, or the whole subtree at once (recursive: warren agent terminate --recursive)", a.name(), n, kids, them)
	}
	a.mu.Lock()
	if a.p.Terminated {
		a.mu.Unlock()
		return nil
	}
	var liveTok, runID string
	if a.hasLiveWait() {
		liveTok, runID = a.p.Run.Wait.TokenID, a.p.Run.RunID
	}
	corrupt := a.corrupt != nil
	a.mu.Unlock()
	if corrupt {
		return failf(ErrWrongState, "agent %s has a damaged log; run `warren repair %s` first", a.id, a.id)
	}
	if liveTok != "" {
		if err := c.revokeToken(a, liveTok, runID, "terminated"); err != nil {
			return err
		}
	}
	if err := c.flushOwed(a); err != nil {
		return fmt.Errorf("terminating %s: %w", a.id, err)
	}
	from := c.stateName(a)
	ended, err := a.log.Append(schema.AgentTerminated, schema.AgentTerminatedData{AgentID: a.id})
	if err != nil {
		return fmt.Errorf("logging agent.terminated for %s: %w", a.id, err)
	}
	info := goneInfoOf(a, ended.TS)
	c.saveSession(a, func(s *session.Session) { s.State = session.StateTerminated; s.Run = nil })
	c.sched.CancelOwner(a.id)
	if lv, ok := c.mux.Remove(a.id); ok {
		_ = lv.sess.Stop()
	}
	name := a.name()
	parentID, _ := c.tree.Parent(a.id)
	// Under the core lock: no subscription to this agent can be added from
	// here on, and those in place are taken for the terminated notice.
	c.mu.Lock()
	a.terminating = true
	watchers := c.subIndex.DropAgent(a.id)
	c.gone.Remember(a.id, name, parentID)
	c.gone.SetInfo(a.id, info)
	_ = c.tree.Remove(a.id)
	delete(c.agents, a.id)
	c.mu.Unlock()
	a.p.Pending.Attach(nil)
	c.notifySubs(a.name(), watchers, from, "terminated", a.id)
	if err := a.log.Close(); err != nil && !errors.Is(err, eventlog.ErrClosed) {
		c.log.Warn("closing the log of a terminated agent", "agent", a.id, "err", err)
	}
	c.log.Info("agent terminated", "agent", a.id)
	c.changed.Fire()
	return nil
}

// Reset starts an idle agent on a fresh context (agent.reset): it logs
// context.reset, so the history given to providers starts after it (the
// log keeps every earlier turn), and stops its live provider session, so the
// next turn opens a new one from the instructions alone.
func (c *Core) Reset(agentID string) error {
	a, ok := c.agent(agentID)
	if !ok {
		return notFound(agentID)
	}
	if err := c.claim(a); err != nil {
		return err
	}
	defer c.release(a)
	a.mu.Lock()
	open := a.p.Run != nil && !a.p.Run.Ended
	a.mu.Unlock()
	if open {
		return failf(ErrWrongState, "agent %s has a run that has not ended (waiting or interrupted); resume or cancel it first", a.name())
	}
	if _, err := a.log.Append(schema.ContextReset, map[string]any{"agent_id": a.id}); err != nil {
		return fmt.Errorf("logging context.reset for %s: %w", a.id, err)
	}
	if lv, ok := c.mux.Remove(a.id); ok {
		_ = lv.sess.Stop()
	}
	c.saveSession(a, func(s *session.Session) { s.ProviderState, s.Handle = nil, "" })
	c.log.Info("agent context reset", "agent", a.id)
	return nil
}
