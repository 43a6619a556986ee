package engine

import (
	"context"
	"time"

	"github.com/warren-dev/warren/engine/internal/notice"
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
// Each method takes the agent table's lock (package roster: through
// c.agent, or to index a subscription) and one agent's lock (a.mu, in a
// method of its record) one after the other, for a snapshot or a field,
// never one inside the other, and holds neither across a log append (an append takes a.mu
// itself: OnAppend folds the entry into the projection), a wake or a call
// into other packages. The one nesting is CancelReminder's: the agent's
// reminder Timers (package reminders, which serialise it with the
// reminder firing) around a.mu sections and the reminder.cancelled
// append, the order a firing takes them in. So the order is
//
//	Attempt.serial -> a's Timers -> one of: roster.mu, a.mu, a log append
//
// The tree's methods are the tree's own (toolexec.Tree).
type toolEnv struct {
	*tree.Tree
	c *Core
}

var _ toolexec.Env = (*toolEnv)(nil)

func (c *Core) env() *toolEnv { return &c.tools }

func (e *toolEnv) core() *Core { return e.c }

// CallTool runs a tool for an agent outside any turn (the tool.call method).
func (c *Core) CallTool(ctx context.Context, agentID, tool string, args map[string]any) (map[string]any, error) {
	a, ok := c.agent(agentID)
	if !ok {
		return nil, notFound(agentID)
	}
	if args == nil {
		args = map[string]any{}
	}
	return toolexec.CallOutside(ctx, c.env(), toolexec.Caller{ID: a.ID(), Log: a.Log}, tool, args)
}

// newRunTools starts the ToolCaller of one attempt of a turn. Calls the
// log already records for the run are answered from the record.
func (c *Core) newRunTools(a *agent, runID string, turn int) *runTools {
	calls, resume := a.Recorded(runID)
	recorded := make([]toolexec.Recorded, len(calls))
	for i, rc := range calls {
		recorded[i] = toolexec.Recorded{Tool: rc.Tool, Result: rc.Result, Error: rc.Error,
			Redo: func(args map[string]any) { c.reapply(a, rc.Tool, args, &rc) }}
	}
	t := &runTools{}
	t.Init(c.env(), toolexec.Caller{ID: a.ID(), Log: a.Log}, runID, turn, recorded, resume)
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
	return a.ToolView(), true
}

func (e *toolEnv) DisplayName(id string) string { return e.core().displayName(id) }

func (e *toolEnv) Inbox(id string) ([]inbox.Message, []string) {
	a, ok := e.core().agent(id)
	if !ok {
		return nil, nil
	}
	return a.Pending()
}

func (e *toolEnv) PendingFirst(id string, n int, b int64) []inbox.Message {
	a, ok := e.core().agent(id)
	if !ok {
		return nil
	}
	return a.PendingFirst(n, b)
}

func (e *toolEnv) FillPayloads(owner string, msgs []inbox.Message) ([]inbox.Message, error) {
	return e.core().fillPayloads(e.c.ctx, owner, msgs)
}

// Mail.

func (e *toolEnv) CheckEnqueue(m inbox.Message, n int, b int64) (bool, error) {
	return e.core().checkSend(m)
}

func (e *toolEnv) Enqueue(m inbox.Message) error { return e.core().appendMessage(m, nil) }

func (e *toolEnv) MarkDelivered(id string, msgIDs []string) error {
	return e.core().markDelivered(id, msgIDs)
}

// Effects.

func (e *toolEnv) CheckProvider(name string) error {
	_, err := e.core().provider(name)
	return err
}

// The children's spawns and completion are package lifecycle's.

func (e *toolEnv) ChildSpec(parent, id string, v tools.SpawnAgent) toolexec.ChildSpec {
	return toolexec.ChildSpec(e.c.childOf(parent, id, v))
}

func (e *toolEnv) CheckChild(spec *toolexec.ChildSpec) error {
	return e.c.checkChild((*CreateSpec)(spec))
}

func (e *toolEnv) CreateChild(spec toolexec.ChildSpec) error {
	return e.c.createChild(CreateSpec(spec))
}

func (e *toolEnv) DeferSpawn(parent string, spec toolexec.ChildSpec) bool {
	return e.c.deferSpawnOf(parent, CreateSpec(spec))
}
func (e *toolEnv) MarkCompleting(id string) { e.c.markCompleting(id) }

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
	_, err := a.Append(schema.MetadataUpdated, schema.MetadataUpdatedData{Key: key, Value: value})
	return err
}

func (e *toolEnv) SetGate(id, name string, gated bool) error {
	return e.core().setGate(id, name, gated)
}

func (e *toolEnv) PermitTurn(id, name string) error {
	return e.core().permitTurn(id, name)
}

func (e *toolEnv) ScheduleReminder(id string, r toolexec.Reminder) error {
	return e.core().scheduleReminder(id, r)
}

func (e *toolEnv) CancelReminder(id, reminderID string) (bool, error) {
	return e.core().cancelReminder(id, reminderID)
}

func (e *toolEnv) Subscribe(subscriber string, s toolexec.Subscription) (bool, error) {
	return e.core().subscribe(subscriber, subscriptionRec(s))
}

func (e *toolEnv) Unsubscribe(subscriber, subscriptionID string) (bool, error) {
	return e.core().unsubscribe(subscriber, subscriptionID)
}

func (e *toolEnv) AwaitInput(id string, v tools.AwaitInput, pos toolexec.Pos) error {
	a, ok := e.core().agent(id)
	if !ok {
		return errNotFoundAgent
	}
	return e.core().beginWait(a, v, pos.RunID, pos.Turn)
}

// Unreserve gives back the room of checked messages that will not be
// enqueued (toolexec.Unreserver).
func (e *toolEnv) Unreserve(msgs []inbox.Message) {
	for _, m := range msgs {
		e.core().unreserve(m.ID)
	}
}
