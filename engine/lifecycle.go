package engine

import (
	"context"

	"github.com/warren-dev/warren/engine/internal/gone"
	"github.com/warren-dev/warren/engine/internal/lifecycle"
	"github.com/warren-dev/warren/engine/internal/subs"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/session"
	"github.com/warren-dev/warren/store"
	"github.com/warren-dev/warren/tree"
)

// An agent's creation, spawn, reset and termination are ordered in
// package lifecycle; the Core carries out each step through lifeHost and
// lifeAgent below.

// CreateSpec describes a new agent.
type CreateSpec = lifecycle.Spec

// TerminatedAgent is one agent agent.terminate terminated: its id and the
// path it had.
type TerminatedAgent = lifecycle.Terminated

// bootstrapPrompt is the first turn of a spawned child.
const bootstrapPrompt = lifecycle.BootstrapPrompt

// life is package lifecycle over the Core.
func (c *Core) life() lifecycle.Lifecycle {
	return lifecycle.Lifecycle{Host: lifeHost{c}, Tree: c.tree, Now: c.now, Log: c.log, Ctx: c.ctx,
		DefaultProvider: c.opts.DefaultProvider, DefaultModel: c.opts.DefaultModel, NoWake: c.opts.NoWake}
}

// CreateAgent creates an agent durably: its provider session, its log with
// agent.created and session.created in one write, and session.json. The
// agent exists (and survives any crash) once CreateAgent returns nil.
func (c *Core) CreateAgent(ctx context.Context, spec CreateSpec) (string, error) {
	return c.life().Create(ctx, spec)
}

// Terminate terminates a leaf agent that runs no turn.
func (c *Core) Terminate(agentID string) error { return c.life().Terminate(agentID) }

// TerminateTree terminates agentID and all its descendants, deepest first
// (agent.terminate with recursive). When one of them is mid-turn nothing is
// terminated. It returns the terminated agents in order; an error part way
// says which were terminated already.
func (c *Core) TerminateTree(agentID string) ([]TerminatedAgent, error) {
	return c.life().TerminateTree(agentID)
}

// Reset starts an idle agent on a fresh context (agent.reset): it logs
// context.reset, so the history given to providers starts after it (the
// log keeps every earlier turn), and stops its live provider session, so the
// next turn opens a new one from the instructions alone.
func (c *Core) Reset(agentID string) error { return c.life().Reset(agentID) }

// lifeHost is the Core as package lifecycle acts on it.
type lifeHost struct{ c *Core }

func (h lifeHost) Lookup(id string) (lifecycle.Agent, error) {
	a, ok := h.c.agent(id)
	if !ok {
		return nil, notFound(id)
	}
	return lifeAgent{a, h.c}, nil
}

func (h lifeHost) Provider(name string) (provider.Provider, error) { return h.c.provider(name) }
func (h lifeHost) CheckModel(prov string, model *string) error     { return h.c.checkModel(prov, model) }
func (h lifeHost) Served(p provider.Provider, name, model string) error {
	return checkServed(p, name, model)
}
func (h lifeHost) CheckText(instr string, md map[string]string) error {
	return h.c.checkAgentText(instr, md)
}
func (h lifeHost) NewID() string             { return newID() }
func (h lifeHost) DropLease(id string)       { h.c.dropLease(id) }
func (h lifeHost) RemoveOrphanDir(id string) { h.c.removeOrphanDir(id) }
func (h lifeHost) Changed()                  { h.c.changed.Fire() }

func (h lifeHost) Reserve(id, name, parentID string) (closed bool, err error) {
	return h.c.agents.Reserve(id, name, parentID)
}
func (h lifeHost) Unreserve(id string) { h.c.agents.Unreserve(id) }

func (h lifeHost) OpenSession(ctx context.Context, prov provider.Provider, id string, spec CreateSpec) (lifecycle.Session, error) {
	return h.c.sessions.Create(ctx, prov, id, spec)
}

func (h lifeHost) OpenLog(id string) (lifecycle.NewLog, error) {
	l := &newLog{c: h.c, id: id}
	lg, err := h.c.openLog(id, &l.a)
	if err != nil {
		return nil, err
	}
	l.Log = lg
	return l, nil
}

func (h lifeHost) Notify(name string, watchers []subs.Sub, from, to, key string) {
	subs.Notify[*agent](h.c.mail(), watchers, name, from, to, key)
}

func (h lifeHost) Tell(to, text string) error {
	return h.c.enqueue(h.c.newMessage(newID(), tree.System, to, inbox.KindError, text))
}

func (h lifeHost) ReadSeq(ctx context.Context, id string, seq uint64, off int64) (eventlog.Entry, error) {
	return h.c.st.ReadSeq(ctx, id, seq, off)
}

// newLog is a new agent's log; a is the agent its appends fold into.
type newLog struct {
	store.Log
	c  *Core
	id string
	a  *agent
}

func (l *newLog) AppendBatch(recs []eventlog.Record) error {
	_, err := l.Log.AppendBatch(recs)
	return err
}

func (l *newLog) Bind() lifecycle.Agent {
	l.a = newAgent(l.id, l.Log, newProjection())
	l.a.CountIn(&l.c.pending)
	return lifeAgent{l.a, l.c}
}

func (l *newLog) Adopt() { l.c.agents.Put(l.id, l.a) }

// lifeAgent is an agent as package lifecycle acts on it: its record, and
// the steps that need the Core.
type lifeAgent struct {
	*agent
	c *Core
}

func (x lifeAgent) Save(f func(s *session.Session)) { x.c.saveSession(x.agent, f) }
func (x lifeAgent) Release()                        { x.c.release(x.agent) }
func (x lifeAgent) FlushOwed() error                { return x.c.flushOwed(x.agent) }
func (x lifeAgent) StopTimers()                     { x.c.sched.CancelOwner(x.ID()) }
func (x lifeAgent) Bootstrap()                      { x.c.bootstrap(x.agent) }
func (x lifeAgent) SetSnapshot(s *session.Session)  { x.Snap.Set(s) }

func (x lifeAgent) Revoke(tokenID, runID, reason string) error {
	return x.c.revokeToken(x.agent, tokenID, runID, reason)
}

func (x lifeAgent) StopSession() { x.c.sessions.Stop(x.ID()) }

func (x lifeAgent) Notices(from, to, key string) []eventlog.Record {
	return x.c.noticesFor(x.agent, from, to, key)
}

func (x lifeAgent) Unlist(name, parentID string, info *gone.Info) []subs.Sub {
	return x.c.agents.Unlist(x.agent, name, parentID, info)
}

// The core's side of the tools that act on children (package toolexec
// holds the tools, package lifecycle orders spawns and completion):
// bootstrap turns and the replay of recorded calls (the messages a
// replayed call recorded are redelivered through mailenv.go).

// bootstrap runs a new child's first turn (respecting its gate).
func (c *Core) bootstrap(ch *agent) {
	if ch.Gated() {
		return
	}
	if err := ch.Claim(); err != nil {
		return
	}
	ch.SetPermit(false)
	c.startTurn(ch, TurnRequest{Prompt: bootstrapPrompt})
}

// reapply redoes the idempotent effects of a call answered from the log:
// messages it sent are enqueued if the recipient lacks them, a spawn whose
// child does not exist is queued again, a completion is marked again.
func (c *Core) reapply(a *agent, tool string, args map[string]any, rec *recordedCall) {
	if rec.Error != "" {
		return
	}
	c.redeliverRefs(a.ID(), rec.Messages, false)
	c.life().Redo(lifeAgent{a, c}, tool, args, rec.Result)
}
