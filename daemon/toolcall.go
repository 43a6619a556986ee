package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/tools"
)

// callCtx places a tool call: inside a run (runID set) or outside one (a
// tool.call request made while the agent runs no turn).
type callCtx struct {
	runID string
	turn  int
	index int
	// calls, inside a turn, writes the tool.call entries of
	// deferredLogTools behind the call (calllog.go).
	calls *callLog
}

// derivedID is a deterministic id for an effect of a call inside a run, so a
// call executed again after a crash produces the same message or child id.
func (cc callCtx) derivedID(kind, key string) string {
	if cc.runID == "" {
		return newID()
	}
	h := sha256.Sum256([]byte(cc.runID + "|" + strconv.Itoa(cc.turn) + "|" + strconv.Itoa(cc.index) + "|" + kind + "|" + key))
	return hex.EncodeToString(h[:16])
}

// derivedNoticeID is the id of a message SYSTEM sends about an event named
// by parts: the same event always gets the same id.
func derivedNoticeID(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// runTools is the ToolCaller of one attempt of a turn. Calls the log
// already records for the run, at the same position and with the same tool,
// are answered from the record and not executed again.
type runTools struct {
	c        *Core
	a        *agent
	runID    string
	turn     int
	mu       sync.Mutex
	pos      int
	recorded []recordedCall
	resume   *string // answer to the run's pending await_input
	calls    *callLog
	// serial runs one call at a time, so positions, derived ids and the
	// order of tool.call entries agree when calls also arrive over the
	// socket (agentauth.go).
	serial sync.Mutex
	ext    extCalls
}

func (c *Core) newRunTools(a *agent, runID string, turn int) *runTools {
	t := &runTools{c: c, a: a, runID: runID, turn: turn, calls: newCallLog(a.log)}
	a.mu.Lock()
	if r := a.p.runFor(runID); r != nil {
		t.recorded = append([]recordedCall(nil), r.Calls...)
		if r.ResumeResponse != nil {
			s := *r.ResumeResponse
			t.resume = &s
		}
	}
	a.mu.Unlock()
	return t
}

// CallTool implements provider.ToolCaller.
func (t *runTools) CallTool(ctx context.Context, tool string, args map[string]any) (map[string]any, error) {
	t.serial.Lock()
	defer t.serial.Unlock()
	return t.callOne(ctx, tool, args)
}

// callOne runs one call; the caller holds t.serial.
func (t *runTools) callOne(ctx context.Context, tool string, args map[string]any) (map[string]any, error) {
	t.mu.Lock()
	idx := t.pos
	t.pos++
	var rec *recordedCall
	if idx < len(t.recorded) && t.recorded[idx].Tool == tool {
		r := t.recorded[idx]
		rec = &r
	}
	resume := t.resume
	if rec == nil && tool == "await_input" && resume != nil {
		t.resume = nil
	}
	t.mu.Unlock()
	cc := callCtx{runID: t.runID, turn: t.turn, index: idx, calls: t.calls}
	if rec == nil && !deferredLogTools[tool] {
		// This call's entry follows those written behind earlier calls.
		if err := t.calls.drain(); err != nil {
			return nil, err
		}
	}
	if rec != nil {
		t.c.reapply(t.a, tool, args, rec, cc)
		if rec.Error != "" {
			return map[string]any{"error": rec.Error}, nil
		}
		result := map[string]any{}
		if len(rec.Result) > 0 {
			if err := json.Unmarshal(rec.Result, &result); err != nil {
				return nil, fmt.Errorf("the recorded result of call %d (%s) is malformed: %w", idx, tool, err)
			}
		}
		return result, nil
	}
	if tool == "await_input" && resume != nil {
		result := map[string]any{"response": *resume}
		if err := t.c.logToolCall(t.a, tool, args, result, "", cc, nil); err != nil {
			return nil, err
		}
		return result, nil
	}
	return t.c.callTool(ctx, t.a, tool, args, cc)
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
	return c.callTool(ctx, a, tool, args, callCtx{index: -1})
}

// toolOutcome is what a tool implementation returns: the result (or a
// tool-level error) and the messages it sent, recorded with the call.
type toolOutcome struct {
	result   map[string]any
	toolErr  string
	messages []map[string]any
	// deliver are messages to log in their recipients' logs, concurrently
	// with the call's own tool.call entry.
	deliver []inbox.Message
	// after runs once the call is logged (e.g. terminating an agent that
	// completed outside a turn, which closes its log).
	after func()
}

func toolErr(format string, args ...any) toolOutcome {
	return toolOutcome{toolErr: fmt.Sprintf(format, args...)}
}

func ok(result map[string]any) toolOutcome { return toolOutcome{result: result} }

// callTool parses, executes and logs one tool call.
func (c *Core) callTool(ctx context.Context, a *agent, tool string, args map[string]any, cc callCtx) (map[string]any, error) {
	parsed, perr := tools.ParseOptions{MaxText: c.limits().MessageBytes}.Parse(tool, args)
	var out toolOutcome
	if perr != nil {
		out = toolErr("%v", perr)
	} else {
		var err error
		out, err = c.execTool(ctx, a, parsed, cc)
		if err != nil {
			if errors.Is(err, provider.ErrRunSuspended) {
				return nil, err
			}
			return nil, fmt.Errorf("tool %s for agent %s: %w", tool, a.id, err)
		}
	}
	if err := c.logCallAndDeliver(a, tool, args, out, cc); err != nil {
		return nil, err
	}
	if out.after != nil {
		out.after()
	}
	if out.toolErr != "" {
		return map[string]any{"error": out.toolErr}, nil
	}
	return out.result, nil
}

// logCallAndDeliver logs the call in the caller's log and its messages in
// their recipients' logs at the same time, and returns once all are durable.
func (c *Core) logCallAndDeliver(a *agent, tool string, args map[string]any, out toolOutcome, cc callCtx) error {
	errs := make([]error, len(out.deliver))
	var wg sync.WaitGroup
	for i, m := range out.deliver {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.appendEnqueue(m)
		}()
	}
	var err error
	if cc.calls != nil && deferredLogTools[tool] {
		err = cc.calls.add(toolCallRecord(tool, args, out.result, out.toolErr, cc, out.messages))
	} else {
		err = c.logToolCall(a, tool, args, out.result, out.toolErr, cc, out.messages)
	}
	wg.Wait()
	return errors.Join(append(errs, err)...)
}

func (c *Core) logToolCall(a *agent, tool string, args, result map[string]any, errText string, cc callCtx, msgs []map[string]any) error {
	rec := toolCallRecord(tool, args, result, errText, cc, msgs)
	if _, err := a.log.Append(rec.Event, rec.Data); err != nil {
		return fmt.Errorf("logging tool.call %s for agent %s: %w", tool, a.id, err)
	}
	return nil
}

// toolCallRecord is the tool.call entry of one call.
func toolCallRecord(tool string, args, result map[string]any, errText string, cc callCtx, msgs []map[string]any) eventlog.Record {
	return eventlog.Record{Event: evToolCall, Data: toolCallData{CallID: newID(), Tool: tool, Args: args,
		Result: result, Error: errText, RunID: cc.runID, Turn: cc.turn, Messages: msgs}}
}

// execTool dispatches a parsed call to its implementation.
func (c *Core) execTool(ctx context.Context, a *agent, call any, cc callCtx) (toolOutcome, error) {
	switch v := call.(type) {
	case tools.SendMessage:
		return c.toolSendMessage(a, v, cc)
	case tools.Broadcast:
		return c.toolBroadcast(a, v, cc)
	case tools.CheckInbox:
		return c.toolCheckInbox(a, v)
	case tools.SpawnAgent:
		return c.toolSpawn(a, v, cc)
	case tools.InspectAgent:
		return c.toolInspect(a, v)
	case tools.Complete:
		return c.toolComplete(a, v, cc)
	case tools.Poke:
		return c.toolPoke(a, v)
	case tools.RemindMe:
		return c.toolRemindMe(a, v, cc)
	case tools.CancelReminder:
		return c.toolCancelReminder(a, v)
	case tools.ListChildren:
		return c.toolListChildren(a)
	case tools.SetAgentMetadata:
		return c.toolSetMetadata(a, v)
	case tools.Subscribe:
		return c.toolSubscribe(a, v, cc)
	case tools.Unsubscribe:
		return c.toolUnsubscribe(a, v)
	case tools.Gate:
		return c.toolGate(a, v.AgentName, true)
	case tools.Ungate:
		return c.toolGate(a, v.AgentName, false)
	case tools.PermitTurn:
		return c.toolPermit(a, v)
	case tools.AwaitInput:
		return c.toolAwaitInput(a, v, cc)
	}
	return toolErr("tool %T is not implemented", call), nil
}
