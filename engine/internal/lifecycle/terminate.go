package lifecycle

import (
	"errors"
	"fmt"
	"strings"

	"github.com/warren-dev/warren/engine/internal/domainerr"
	"github.com/warren-dev/warren/engine/internal/subs"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/session"
)

// Terminate terminates a leaf agent that runs no turn.
func (l Lifecycle) Terminate(id string) error {
	a, err := l.Host.Lookup(id)
	if err != nil {
		return err
	}
	if a.Look().Busy {
		return domainerr.New(domainerr.WrongState, "agent %s is mid-turn; cancel it first (warren agent cancel)", a.Name())
	}
	return l.End(a)
}

// TerminateTree terminates id and all its descendants, deepest first.
// When one of them is mid-turn nothing is terminated. It returns the
// terminated agents in order; an error part way says which were
// terminated already.
func (l Lifecycle) TerminateTree(id string) ([]Terminated, error) {
	if _, err := l.Host.Lookup(id); err != nil {
		return nil, err
	}
	order := DeepestFirst(l.Tree.Children, id)
	var busy []string
	for _, id := range order {
		if a, err := l.Host.Lookup(id); err == nil && a.Look().Busy {
			busy = append(busy, l.Tree.Path(id))
		}
	}
	if len(busy) > 0 {
		verb := "are"
		if len(busy) == 1 {
			verb = "is"
		}
		return nil, domainerr.New(domainerr.WrongState, "nothing was terminated: %s %s mid-turn; cancel first (warren agent cancel REF), then terminate again",
			strings.Join(busy, ", "), verb)
	}
	done := make([]Terminated, 0, len(order))
	for _, id := range order {
		a, err := l.Host.Lookup(id)
		if err != nil {
			continue // terminated meanwhile
		}
		path := l.Tree.Path(id)
		if err := l.Terminate(id); err != nil {
			names := make([]string, len(done))
			for i, d := range done {
				names[i] = d.Path
			}
			if len(names) == 0 {
				return nil, err
			}
			return nil, fmt.Errorf("terminating %s: %w (already terminated: %s)", a.Name(), err, strings.Join(names, ", "))
		}
		done = append(done, Terminated{ID: id, Path: path})
	}
	return done, nil
}

// DeepestFirst lists id and its descendants (children gives an agent's
// children in order), each agent after all of its own descendants (id
// last).
func DeepestFirst(children func(string) []string, id string) []string {
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

// End terminates a: it logs agent.terminated and drops the agent from the
// tree, the pools and the subscription index, then tells its subscribers.
// An agent with children is refused; a terminated one is left as it is.
func (l Lifecycle) End(a Agent) error {
	id := a.ID()
	if n := len(l.Tree.Children(id)); n > 0 {
		kids, them := "children", "them"
		if n == 1 {
			kids, them = "child", "it"
		}
		return domainerr.New(domainerr.WrongState, "agent %s has %d %s; terminate %s first, or the whole subtree at once (recursive: warren agent terminate --recursive)", a.Name(), n, kids, them)
	}
	look := a.Look()
	if look.Terminated {
		return nil
	}
	if look.Corrupt {
		return domainerr.New(domainerr.WrongState, "agent %s has a damaged log; run `warren repair %s` first", id, id)
	}
	if look.WaitToken != "" {
		if err := a.Revoke(look.WaitToken, look.RunID, schema.RevokeTerminated); err != nil {
			return err
		}
	}
	if err := a.FlushOwed(); err != nil {
		return fmt.Errorf("terminating %s: %w", id, err)
	}
	from := a.State()
	// The notices owed to the subscriptions in place now go in the same
	// write; Unlist below takes those added since, which are told too.
	ended, err := subs.AppendWith(a, a.Notices(from, schema.StateTerminated, id), eventlog.Record{Event: schema.AgentTerminated,
		Data: schema.AgentTerminatedData{AgentID: id}})
	if err != nil {
		return fmt.Errorf("logging agent.terminated for %s: %w", id, err)
	}
	info := a.GoneInfo(ended.TS)
	a.Save(func(s *session.Session) { s.State = session.StateTerminated; s.Run = nil })
	a.StopTimers()
	a.StopSession()
	name := a.Name()
	parentID, _ := l.Tree.Parent(id)
	// Under the engine's lock: no subscription to this agent can be added
	// from here on, and those in place are taken for the terminated
	// notice.
	watchers := a.Unlist(name, parentID, info)
	a.Detach()
	l.Host.Notify(name, watchers, from, schema.StateTerminated, id)
	if err := a.CloseLog(); err != nil && !errors.Is(err, eventlog.ErrClosed) {
		l.Log.Warn("closing the log of a terminated agent", "agent", id, "err", err)
	}
	l.Log.Info("agent terminated", "agent", id)
	l.Host.Changed()
	return nil
}

// Reset starts an idle agent on a fresh context: it logs context.reset,
// so the history given to providers starts after it (the log keeps every
// earlier turn), and stops its live provider session, so the next turn
// opens a new one from the instructions alone.
func (l Lifecycle) Reset(id string) error {
	a, err := l.Host.Lookup(id)
	if err != nil {
		return err
	}
	if err := a.Claim(); err != nil {
		return err
	}
	defer a.Release()
	if a.Look().OpenRun {
		return domainerr.New(domainerr.WrongState, "agent %s has a run that has not ended (waiting or interrupted); resume or cancel it first", a.Name())
	}
	id = a.ID()
	if _, err := a.Append(schema.ContextReset, schema.ContextResetData{AgentID: id}); err != nil {
		return fmt.Errorf("logging context.reset for %s: %w", id, err)
	}
	a.StopSession()
	a.Save(func(s *session.Session) { s.ProviderState, s.Handle = nil, "" })
	l.Log.Info("agent context reset", "agent", id)
	return nil
}
