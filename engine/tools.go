package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/warren-dev/warren/engine/internal/notice"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/tools"
)

// The agent tools (SPEC 6): every tool of package tools' catalog runs
// here, whoever calls it:
//
//   - a provider, during a turn, through the attempt's toolAttempt (the
//     provider.ToolCaller and provider.BatchToolCaller of the attempt,
//     tools_attempt.go);
//   - the MCP bridge of an agent CLI (warren mcp-bridge), through the
//     socket's tool.call with the agent's credential, which joins the same
//     toolAttempt (agentauth.go);
//   - the operator's tool.call outside any turn (CallTool).
//
// A call is parsed (tools.Parse, typed calls), executed (execTool: one
// method per tool, returning a toolOutcome built with the catalog's
// result builders), then logged as a tool.call entry
// (schema.ToolCallData) in the caller's log while the messages it sent
// are logged in their recipients' logs; it is answered once all are
// durable. A tool-level failure (bad argument, routing refused, not
// found, a limit) is a normal result {"error": ...}; an error return
// means the call itself failed (a log write, or the run suspended by
// await_input).
//
// Inside a run a call has a position (callPos: run, turn, index). The ids
// of its effects (messages, children, reminders, subscriptions) derive
// from the position, so a call made again after a crash produces the
// same ids and a recipient that already has a message does not get it
// twice. An attempt answers the calls the log already records for the
// run, at the same position and with the same tool, from the record, and
// redoes only their idempotent effects (reapply).
//
// Locks: a call holds no lock of the core while it runs; an attempt holds
// its serial lock across one call. Each step takes the roster's lock and
// one record's lock one after the other, never one inside the other, and
// holds neither across a log append, a wake or a call out. The one
// nesting is cancelReminder's: the agent's remMu around record reads and
// the reminder.cancelled append. So: toolAttempt.serial -> a.remMu -> one
// of roster.mu, the record's lock, a log append.

// CallTool runs a tool for an agent outside any turn (the tool.call
// method, with the operator's authority): parse, execute, log the
// tool.call entry and the messages, then answer.
func (c *Core) CallTool(ctx context.Context, agentID, tool string, args map[string]any) (map[string]any, error) {
	a, ok := c.agent(agentID)
	if !ok {
		return nil, notFound(agentID)
	}
	if a.Log == nil {
		// Listed for its damage, with no log to record a call in.
		return nil, failf(ErrWrongState, "agent %s has no usable log: %v; run `warren repair %s`", a.Name(), a.Corrupt(), a.ID())
	}
	if args == nil {
		args = map[string]any{}
	}
	return c.callTool(ctx, a, tool, args, outsidePos, nil)
}

// callPos places a call: inside a run (RunID set), at position Index of
// its turn's calls, or outside any run (RunID "", Index -1: a tool.call
// made while the agent runs no turn).
type callPos struct {
	RunID string
	Turn  int
	Index int
}

// outsidePos is the position of a call made outside any run.
var outsidePos = callPos{Index: -1}

// derivedID is a deterministic id for an effect of a call inside a run,
// so a call executed again after a crash produces the same message or
// child id; outside a run it is a fresh id.
func derivedID(pos callPos, kind, key string) string {
	if pos.RunID == "" {
		return newID()
	}
	h := sha256.Sum256([]byte(pos.RunID + "|" + strconv.Itoa(pos.Turn) + "|" + strconv.Itoa(pos.Index) + "|" + kind + "|" + key))
	return hex.EncodeToString(h[:16])
}

// toolOutcome is what a tool returns: the result (or a tool-level error)
// and the messages it sent, recorded with the call.
type toolOutcome struct {
	Result map[string]any
	// Err is a tool-level failure: the result is {"error": Err}.
	Err string
	// Messages are the envelopes of the messages sent, recorded in the
	// call's tool.call entry.
	Messages []map[string]any
	// Deliver are messages to log in their recipients' logs, concurrently
	// with the call's own tool.call entry (their room is reserved).
	Deliver []inbox.Message
	// After runs once the call is logged (e.g. terminating an agent that
	// completed outside a turn, which closes its log).
	After func()
}

// Reply is the result the caller sees.
func (o toolOutcome) Reply() map[string]any {
	if o.Err != "" {
		return tools.ErrorResult("%s", o.Err)
	}
	return o.Result
}

func toolFailed(format string, args ...any) toolOutcome {
	return toolOutcome{Err: fmt.Sprintf(format, args...)}
}

func toolDone(result map[string]any) toolOutcome { return toolOutcome{Result: result} }

// callRecord is the tool.call entry of one call.
func callRecord(tool string, args map[string]any, o toolOutcome, pos callPos) eventlog.Record {
	return eventlog.Record{Event: schema.ToolCall, Data: schema.ToolCallData{CallID: newID(), Tool: tool, Args: args,
		Result: o.Result, Error: o.Err, RunID: pos.RunID, Turn: pos.Turn, Messages: o.Messages}}
}

// parseTool parses a call's arguments with the limits in force.
func (c *Core) parseTool(tool string, args map[string]any) (tools.Call, error) {
	return tools.ParseOptions{MaxText: c.limits().MessageBytes}.Parse(tool, args)
}

// callTool parses, executes and logs one call of agent self at pos. With
// deferred set, the tool.call entry of a send is written behind the call
// (tools_calllog.go).
func (c *Core) callTool(ctx context.Context, self *agent, tool string, args map[string]any, pos callPos, deferred *callLog) (map[string]any, error) {
	var out toolOutcome
	if parsed, perr := c.parseTool(tool, args); perr != nil {
		out = toolFailed("%v", perr)
	} else {
		if err := c.awaitLease(ctx, self.ID()); err != nil {
			return nil, fmt.Errorf("tool %s for agent %s: %w", tool, self.ID(), err)
		}
		var err error
		out, err = c.execTool(ctx, self.ID(), parsed, pos)
		// Room the call's messages hold and do not use is given back.
		defer c.unreserveAll(out.Deliver)
		if err != nil {
			if errors.Is(err, provider.ErrRunSuspended) {
				return nil, err
			}
			return nil, fmt.Errorf("tool %s for agent %s: %w", tool, self.ID(), err)
		}
	}
	if err := c.logCallAndDeliver(self, tool, args, out, pos, deferred); err != nil {
		return nil, err
	}
	if out.After != nil {
		out.After()
	}
	return out.Reply(), nil
}

// logCallAndDeliver logs the call in the caller's log and its messages in
// their recipients' logs at the same time, and returns once all are
// durable.
func (c *Core) logCallAndDeliver(self *agent, tool string, args map[string]any, out toolOutcome, pos callPos, deferred *callLog) error {
	errs := make([]error, len(out.Deliver))
	var wg sync.WaitGroup
	for i, m := range out.Deliver {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.appendMessage(m, nil)
		}()
	}
	var err error
	if deferred != nil && deferredLogTools[tool] {
		err = deferred.add(callRecord(tool, args, out, pos))
	} else {
		err = logCall(self, tool, args, out, pos)
	}
	wg.Wait()
	return errors.Join(append(errs, err)...)
}

func logCall(self *agent, tool string, args map[string]any, out toolOutcome, pos callPos) error {
	rec := callRecord(tool, args, out, pos)
	if _, err := self.Append(rec.Event, rec.Data); err != nil {
		return fmt.Errorf("logging tool.call %s for agent %s: %w", tool, self.ID(), err)
	}
	return nil
}

// unreserveAll gives back the room of checked messages that will not be
// enqueued.
func (c *Core) unreserveAll(msgs []inbox.Message) {
	for _, m := range msgs {
		c.unreserve(m.ID)
	}
}

// execTool runs a parsed call for agent self at pos and returns its
// outcome, nothing of it logged yet. An error is a failure of the call
// itself (a log write failed, or provider.ErrRunSuspended from
// await_input), not a tool-level error.
func (c *Core) execTool(ctx context.Context, self string, call tools.Call, pos callPos) (toolOutcome, error) {
	x := toolExec{c: c, ctx: ctx, self: self, pos: pos}
	switch v := call.(type) {
	case tools.SendMessage:
		return x.sendMessage(v)
	case tools.Broadcast:
		return x.broadcast(v)
	case tools.CheckInbox:
		return x.checkInbox(v)
	case tools.SpawnAgent:
		return x.spawn(v)
	case tools.InspectAgent:
		return x.inspect(v)
	case tools.Complete:
		return x.complete(v)
	case tools.Poke:
		return x.poke(v)
	case tools.RemindMe:
		return x.remindMe(v)
	case tools.CancelReminder:
		return x.cancelReminder(v)
	case tools.ListChildren:
		return x.listChildren()
	case tools.SetAgentMetadata:
		return x.setMetadata(v)
	case tools.Subscribe:
		return x.subscribe(v)
	case tools.Unsubscribe:
		return x.unsubscribe(v)
	case tools.Gate:
		return x.gate(v.AgentName, true)
	case tools.Ungate:
		return x.gate(v.AgentName, false)
	case tools.PermitTurn:
		return x.permit(v)
	case tools.AwaitInput:
		return x.awaitInput(v)
	case tools.MergeChild:
		return x.mergeChild(v)
	}
	return toolFailed("tool %T is not implemented", call), nil
}

// toolExec is one call being executed: for agent self at pos, bounded by
// ctx.
type toolExec struct {
	c    *Core
	ctx  context.Context
	self string
	pos  callPos
}

func (x toolExec) derivedID(kind, key string) string { return derivedID(x.pos, kind, key) }

func (x toolExec) newMessage(id, recipient string, kind inbox.Kind, payload string) inbox.Message {
	return x.c.newMessage(id, x.self, recipient, kind, payload)
}

// toolView is what the tools read of agent id (false when it is not
// listed).
func (c *Core) toolView(id string) (toolAgent, bool) {
	a, ok := c.agent(id)
	if !ok {
		return toolAgent{}, false
	}
	return a.ToolView(), true
}

// toolAgent is an agent as the tools see it, read in one look.
type toolAgent struct {
	ID       string
	Name     string
	ParentID string
	// State is idle, busy, waiting or terminated (schema.State*).
	State    string
	Gated    bool
	Busy     bool
	Metadata map[string]string // a copy
	Pending  int               // pending messages
}

// What one check_inbox takes and one inspect_agent shows: at most
// maxWakeBatch messages (at least one) and about pageBytes of text.
const (
	takeCount   = maxWakeBatch
	takeBytes   = pageBytes
	recentCount = notice.MaxListed
	recentBytes = pageBytes
)
