package engine

import (
	"context"
	"errors"
	"fmt"
	"github.com/warren-dev/warren/internal/textcut"
	"strings"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/session"
)

// An agent's end: terminate ends a leaf that runs no turn: a live wait's
// token is revoked, an owed run end written, agent.terminated logged, then
// the agent is retired (session.json, its timers, its provider session),
// unlisted in one step under the roster's lock (subscriptions to it
// taken, remembered as gone, out of the tree and the table), and its
// subscribers are told. TerminateTree does a subtree, deepest first,
// refusing everything when one of its agents is mid-turn. Reset logs
// context.reset on an idle agent and stops its provider session.

// TerminatedAgent is one agent a terminate terminated: its id and the
// path it had.
type TerminatedAgent struct{ ID, Path string }

// Terminate terminates a leaf agent that runs no turn.
func (c *Core) Terminate(ctx context.Context, agentID string) error {
	a, ok := c.agent(agentID)
	if !ok {
		return notFound(agentID)
	}
	if a.Look().Busy {
		return failf(ErrWrongState, "agent %s is mid-turn; cancel it first (warren agent cancel)", a.Name())
	}
	return c.terminate(ctx, a)
}

// TerminateTree terminates an agent and all its descendants, deepest
// first. When one of them is mid-turn nothing is terminated. It returns
// the terminated agents in order; an error part way says which were
// terminated already.
func (c *Core) TerminateTree(ctx context.Context, agentID string) ([]TerminatedAgent, error) {
	if _, ok := c.agent(agentID); !ok {
		return nil, notFound(agentID)
	}
	order := deepestFirst(c.tree.Children, agentID)
	var busy []string
	for _, id := range order {
		if a, ok := c.agent(id); ok && a.Look().Busy {
			busy = append(busy, c.tree.Path(id))
		}
	}
	if len(busy) > 0 {
		verb := "are"
		if len(busy) == 1 {
			verb = "is"
		}
		return nil, failf(ErrWrongState, "nothing was terminated: %s %s mid-turn; cancel first (warren agent cancel REF), then terminate again",
			listCut(busy, 10, 1024), verb)
	}
	done := make([]TerminatedAgent, 0, len(order))
	for _, id := range order {
		a, ok := c.agent(id)
		if !ok {
			continue // terminated meanwhile
		}
		path := c.tree.Path(id)
		if err := c.Terminate(ctx, id); err != nil {
			names := make([]string, len(done))
			for i, d := range done {
				names[i] = d.Path
			}
			if len(names) == 0 {
				return nil, err
			}
			return nil, fmt.Errorf("terminating %s: %w (already terminated: %s)", a.Name(), err, strings.Join(names, ", "))
		}
		done = append(done, TerminatedAgent{ID: id, Path: path})
	}
	return done, nil
}

// deepestFirst lists id and its descendants (children gives an agent's
// children in order), each agent after all of its own descendants (id
// last).
func deepestFirst(children func(string) []string, id string) []string {
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
		kids := children(f.id)
		for i := len(kids) - 1; i >= 0; i-- {
			stack = append(stack, frame{id: kids[i]})
		}
	}
	return out
}

// terminate terminates a: it logs agent.terminated and drops the agent
// from the tree, the pools and the subscription index, then tells its
// subscribers. An agent with children is refused; a terminated one is
// left as it is.
func (c *Core) terminate(ctx context.Context, a *agent) error {
	id := a.ID()
	if n := len(c.tree.Children(id)); n > 0 {
		kids, them := "children", "them"
		if n == 1 {
			kids, them = "child", "it"
		}
		return failf(ErrWrongState, "agent %s has %d %s; terminate %s first, or the whole subtree at once (recursive: warren agent terminate --recursive)", a.Name(), n, kids, them)
	}
	look := a.Look()
	if look.Terminated {
		return nil
	}
	if look.Corrupt {
		return failf(ErrWrongState, "agent %s has a damaged log; run `warren repair %s` first", id, id)
	}
	if look.WaitToken != "" {
		if err := c.revokeToken(a, look.WaitToken, look.RunID, schema.RevokeTerminated); err != nil {
			return err
		}
	}
	if err := c.flushOwed(a); err != nil {
		return fmt.Errorf("terminating %s: %w", id, err)
	}
	// Its work is kept on its branch before it goes (SPEC 12).
	if err := c.closeWorkspace(ctx, a); err != nil {
		return err
	}
	from := a.State()
	ended, err := appendOwed(a.Log, c.noticesFor(a, from, schema.StateTerminated, id), eventlog.Record{Event: schema.AgentTerminated,
		Data: schema.AgentTerminatedData{AgentID: id}})
	if err != nil {
		return fmt.Errorf("logging agent.terminated for %s: %w", id, err)
	}
	info := a.GoneInfo(ended.TS)
	c.saveSession(a, func(s *session.Session) { s.State = session.StateTerminated; s.Run = nil })
	c.sched.CancelOwner(id)
	c.sessions.Stop(id)
	name := a.Name()
	parentID, _ := c.tree.Parent(id)
	watchers := c.agents.Unlist(a, name, parentID, info)
	a.Detach()
	c.notifyWatchers(watchers, name, from, schema.StateTerminated, id)
	if err := a.CloseLog(); err != nil && !errors.Is(err, eventlog.ErrClosed) {
		c.log.Warn("closing the log of a terminated agent", "agent", id, "err", err)
	}
	c.log.Info("agent terminated", "agent", id)
	c.changed.Fire()
	return nil
}

// Reset starts an idle agent on a fresh context: it logs context.reset,
// so the history given to providers starts after it (the log keeps every
// earlier turn), and stops its live provider session, so the next turn
// opens a new one from the instructions alone.
func (c *Core) Reset(agentID string) error {
	a, ok := c.agent(agentID)
	if !ok {
		return notFound(agentID)
	}
	if err := a.Claim(); err != nil {
		return err
	}
	defer c.release(a)
	if a.Look().OpenRun {
		return failf(ErrWrongState, "agent %s has a run that has not ended (waiting or interrupted); resume or cancel it first", a.Name())
	}
	id := a.ID()
	if _, err := a.Append(schema.ContextReset, schema.ContextResetData{AgentID: id}); err != nil {
		return fmt.Errorf("logging context.reset for %s: %w", id, err)
	}
	c.sessions.Stop(id)
	c.saveSession(a, func(s *session.Session) { s.ProviderState, s.Handle = nil, "" })
	c.log.Info("agent context reset", "agent", id)
	return nil
}

// listCut joins items for an error text, at most n of them and about
// bytes of text, naming how many more were left out: an error names what
// matters, and never grows with the tree (issue 31, D5).
func listCut(items []string, n, bytes int) string {
	var b strings.Builder
	for i, s := range items {
		if i == n || (i > 0 && b.Len()+len(s) > bytes) {
			fmt.Fprintf(&b, " and %d more", len(items)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(textcut.Cut(s, bytes, "..."))
	}
	return b.String()
}
