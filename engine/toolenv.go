package engine

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/warren-dev/warren/engine/internal/gate"
	"github.com/warren-dev/warren/engine/internal/lifecycle"
	"github.com/warren-dev/warren/engine/internal/mail"
	"github.com/warren-dev/warren/engine/internal/notice"
	"github.com/warren-dev/warren/engine/internal/reminders"
	"github.com/warren-dev/warren/engine/internal/subs"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/toolexec"
	"github.com/warren-dev/warren/tools"
	"github.com/warren-dev/warren/tree"
)

// toolEnv is the Core as the tools' environment (toolexec.Env): every tool
// a provider, the MCP bridge (tool.call with an agent credential) or the
// operator (tool.call) calls runs in package toolexec against it.
//
// Locks. toolexec calls these methods holding no lock of the core; within
// one attempt it holds Attempt.serial (one call at a time) around them.
// Each method takes the core lock (c.mu, through c.agent, or to index a
// subscription) and one agent's lock (a.mu) one after the other, for a
// snapshot or a field, never one inside the other, and holds neither
// across a log append (an append takes a.mu itself: OnAppend folds the
// entry into the projection), a wake or a call into other packages. The
// one nesting is CancelReminder's: a.remMu (package reminders' Timers,
// which serialises it with the reminder firing) around a.mu sections and
// the reminder.cancelled append, the order a firing takes them in. So the
// order is
//
//	Attempt.serial -> a.remMu -> one of: c.mu, a.mu, a log append
//
// The tree's methods are the tree's own (toolexec.Tree).
type toolEnv struct {
	*tree.Tree
	c *Core
}

var _ toolexec.Env = (*toolEnv)(nil)

func (c *Core) env() *toolEnv { return &c.tools }

func (e *toolEnv) core() *Core { return e.c }

// callCtx places a call for the code outside toolexec that needs its run
// (beginWait).
type callCtx struct {
	runID string
	turn  int
}

// CallTool runs a tool for an agent outside any turn (the tool.call method).
func (c *Core) CallTool(ctx context.Context, agentID, tool string, args map[string]any) (map[string]any, error) {
	a, ok := c.agent(agentID)
	if !ok {
		return nil, notFound(agentID)
	}
	if args == nil {
		args = map[string]any{}
	}
	return toolexec.CallOutside(ctx, c.env(), toolexec.Caller{ID: a.id, Log: a.log}, tool, args)
}

// newRunTools starts the ToolCaller of one attempt of a turn. Calls the
// log already records for the run are answered from the record.
func (c *Core) newRunTools(a *agent, runID string, turn int) *runTools {
	var recorded []toolexec.Recorded
	var resume *string
	a.mu.Lock()
	if r := a.p.RunFor(runID); r != nil {
		recorded = make([]toolexec.Recorded, len(r.Calls))
		for i, rc := range r.Calls {
			recorded[i] = toolexec.Recorded{Tool: rc.Tool, Result: rc.Result, Error: rc.Error,
				Redo: func(args map[string]any) { c.reapply(a, rc.Tool, args, &rc) }}
		}
		if r.ResumeResponse != nil {
			s := *r.ResumeResponse
			resume = &s
		}
	}
	a.mu.Unlock()
	t := &runTools{}
	t.Init(c.env(), toolexec.Caller{ID: a.id, Log: a.log}, runID, turn, recorded, resume)
	return t
}

// Clock.

func (e *toolEnv) Now() time.Time { return e.c.now() }

func (e *toolEnv) NewID() string { return newID() }

func (e *toolEnv) Limits() toolexec.Limits {
	return toolexec.Limits{MessageBytes: e.core().limits().MessageBytes, TakeCount: maxWakeBatch, TakeBytes: pageBytes,
		RecentCount: notice.MaxListed, RecentBytes: pageBytes}
}

// Agents.

func (e *toolEnv) Agent(id string) (toolexec.Agent, bool) {
	a, ok := e.core().agent(id)
	if !ok {
		return toolexec.Agent{}, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return toolexec.Agent{ID: a.id, Name: a.p.Name, ParentID: a.p.ParentID, State: a.stateLocked(), Gated: a.p.Gated,
		Busy: a.busy, Metadata: maps.Clone(a.p.Metadata), Pending: a.p.Pending.Len()}, true
}

func (e *toolEnv) DisplayName(id string) string { return e.core().displayName(id) }

func (e *toolEnv) Inbox(id string) ([]inbox.Message, []string) {
	a, ok := e.core().agent(id)
	if !ok {
		return nil, nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var shown []string
	if a.cur != nil {
		if r := a.p.RunFor(a.cur.runID); r != nil {
			shown = slices.Clone(r.MessageIDs)
		}
	}
	return a.p.Pending.Peek(), shown
}

func (e *toolEnv) PendingFirst(id string, n int, b int64) []inbox.Message {
	a, ok := e.core().agent(id)
	if !ok {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.p.Pending.PeekFirst(n, b)
}

func (e *toolEnv) FillPayloads(owner string, msgs []inbox.Message) ([]inbox.Message, error) {
	return e.core().fillPayloads(owner, msgs)
}

// Mail.

func (e *toolEnv) CheckEnqueue(m inbox.Message, n int, b int64) (bool, error) {
	return mail.Check[*agent](e.core().mail(), m)
}

func (e *toolEnv) Enqueue(m inbox.Message) error { return mail.Append[*agent](e.core().mail(), m) }

func (e *toolEnv) MarkDelivered(id string, msgIDs []string) error {
	return mail.Delivered[*agent](e.core().mail(), id, msgIDs)
}

// Effects.

func (e *toolEnv) CheckProvider(name string) error {
	_, err := e.core().provider(name)
	return err
}

func (e *toolEnv) ChildSpec(parent, id string, v tools.SpawnAgent) toolexec.ChildSpec {
	a, ok := e.core().agent(parent)
	if !ok {
		return toolexec.ChildSpec{ID: id, Name: v.Name, ParentID: parent, Instructions: v.Instructions,
			Provider: v.Provider, Model: v.Model, Metadata: v.Metadata}
	}
	return toolexec.ChildSpec(lifecycle.ChildSpec(a.id, lifeAgent{e.c, a}.Inherit(), id, v))
}

func (e *toolEnv) CheckChild(spec *toolexec.ChildSpec) error {
	c := e.core()
	if err := c.checkAgentText(spec.Instructions, spec.Metadata); err != nil {
		return err
	}
	if err := c.checkModel(spec.Provider, &spec.Model); err != nil {
		return err
	}
	prov, err := c.provider(spec.Provider)
	if err != nil {
		return err
	}
	return checkServed(prov, spec.Provider, spec.Model)
}

func (e *toolEnv) CreateChild(spec toolexec.ChildSpec) error {
	c := e.core()
	if _, err := c.CreateAgent(c.ctx, CreateSpec(spec)); err != nil {
		return err
	}
	if ch, ok := c.agent(spec.ID); ok && !c.opts.NoWake {
		c.bootstrap(ch)
	}
	return nil
}

func (e *toolEnv) DeferSpawn(parent string, spec toolexec.ChildSpec) bool {
	a, ok := e.core().agent(parent)
	if !ok {
		return false
	}
	return e.c.life().Defer(lifeAgent{e.c, a}, CreateSpec(spec))
}

func (e *toolEnv) MarkCompleting(id string) {
	if a, ok := e.core().agent(id); ok {
		e.c.life().Complete(lifeAgent{e.c, a})
	}
}

func (e *toolEnv) Poke(id string) {
	if a, ok := e.core().agent(id); ok {
		e.core().poke(a)
	}
}

func (e *toolEnv) CheckMetadata(md map[string]string) error { return e.core().checkAgentText("", md) }

func (e *toolEnv) SetMetadata(id, key string, value *string) error {
	a, ok := e.core().agent(id)
	if !ok {
		return errNotFoundAgent
	}
	_, err := a.log.Append(schema.MetadataUpdated, schema.MetadataUpdatedData{Key: key, Value: value})
	return err
}

func (e *toolEnv) SetGate(id, name string, gated bool) error {
	return gate.Set[*agent](e.core().mail(), id, name, gated)
}

func (e *toolEnv) PermitTurn(id, name string) error {
	return gate.Permit[*agent](e.core().mail(), id, name)
}

func (e *toolEnv) ScheduleReminder(id string, r toolexec.Reminder) error {
	return reminders.Schedule[*agent](e.core().mail(), id, r)
}

func (e *toolEnv) CancelReminder(id, reminderID string) (bool, error) {
	return reminders.Cancel[*agent](e.core().mail(), id, reminderID)
}

func (e *toolEnv) Subscribe(subscriber string, s toolexec.Subscription) (bool, error) {
	return subs.Subscribe[*agent](e.core().mail(), subscriber, subscriptionRec(s))
}

func (e *toolEnv) Unsubscribe(subscriber, subscriptionID string) (bool, error) {
	return subs.Unsubscribe[*agent](e.core().mail(), subscriber, subscriptionID)
}

func (e *toolEnv) AwaitInput(id string, v tools.AwaitInput, pos toolexec.Pos) error {
	a, ok := e.core().agent(id)
	if !ok {
		return errNotFoundAgent
	}
	return e.core().beginWait(a, v, callCtx{runID: pos.RunID, turn: pos.Turn})
}
