package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/tools"
	"sync"
)

// The tools of one attempt of a turn (runTools): every call a provider or
// the MCP bridge makes during the attempt goes through its toolAttempt.
// Calls the log already records for the run, at the same position and
// with the same tool, are answered from the record and not executed again
// (SPEC 4, replayed tool calls).
//
// A model step may carry several tool calls (provider.BatchToolCaller).
// When they are all send_message calls and the log records none of them
// yet, they run together: each is checked in position order (its room
// reserved, so the step's own earlier messages to a recipient count
// against its limits), then every message is logged in its recipient's
// log (recipients concurrently, each recipient's messages in position
// order) while the calls are logged in the caller's log as one all-or-none
// batch in position order. A step that the log already records in part (a
// re-run after a crash or a resume), or that holds any other tool, runs
// call by call, so positions, derived ids and replayed answers are those
// of one-by-one calls either way.

// runTools is the ToolCaller of one attempt of a turn: the calls
// providers make (toolAttempt) and the door through which calls made with
// the agent's credential join it (calldoor.go, agentauth.go).
type runTools struct {
	toolAttempt
	Door callDoor
}

// replayedCall is a call the log already records for the run, as the
// attempt answers it.
type replayedCall struct {
	Tool   string
	Result json.RawMessage // the recorded result object; empty for none
	Error  string
	// Redo redoes the call's idempotent effects when the call is answered
	// from the log (messages its recipients lack, a spawn not finished, a
	// completion); args are those of the call made again.
	Redo func(args map[string]any)
}

// newRunTools starts the ToolCaller of one attempt of run runID's turn.
// Calls the log already records for the run are answered from the
// record; the answer to the run's pending await_input (a resume, or a
// timed-out wait re-run) answers that call.
func (c *Core) newRunTools(a *agent, runID string, turn int) *runTools {
	calls, answer := a.Recorded(runID)
	recorded := make([]replayedCall, len(calls))
	for i, rc := range calls {
		recorded[i] = replayedCall{Tool: rc.Tool, Result: rc.Result, Error: rc.Error,
			Redo: func(args map[string]any) { c.reapply(a, rc.Tool, args, &rc) }}
	}
	t := &runTools{}
	t.c, t.self, t.runID, t.turn = c, a, runID, turn
	t.recorded, t.answer, t.calls = recorded, answer, newCallLog(a)
	return t
}

// toolAttempt is the provider.ToolCaller and provider.BatchToolCaller of
// one attempt.
type toolAttempt struct {
	c     *Core
	self  *agent
	runID string
	turn  int

	mu       sync.Mutex
	next     int // the position of the next call
	recorded []replayedCall
	answer   map[string]any // the answer to the run's pending await_input
	calls    *callLog
	// serial runs one call at a time, so positions, derived ids and the
	// order of tool.call entries agree when calls also arrive over the
	// socket.
	serial sync.Mutex
	// suspended is the error of a call or budget gate that suspended the
	// run (provider.ErrRunSuspended): the attempt's outcome whatever the
	// provider answers after it (see suspendedBy).
	suspended error
}

var (
	_ provider.ToolCaller      = (*toolAttempt)(nil)
	_ provider.BatchToolCaller = (*toolAttempt)(nil)
)

// Drain waits until the tool.call entries written behind calls are
// durable, and returns the first write error (the log is poisoned then:
// the turn cannot complete). The end of an attempt is logged after it.
func (t *toolAttempt) Drain() error { return t.calls.drain() }

// CallTool implements provider.ToolCaller.
func (t *toolAttempt) CallTool(ctx context.Context, tool string, args map[string]any) (map[string]any, error) {
	t.serial.Lock()
	defer t.serial.Unlock()
	return t.callOne(ctx, tool, args)
}

// callOne runs one call; the caller holds t.serial.
func (t *toolAttempt) callOne(ctx context.Context, tool string, args map[string]any) (map[string]any, error) {
	t.mu.Lock()
	idx := t.next
	t.next++
	var rec *replayedCall
	if idx < len(t.recorded) && t.recorded[idx].Tool == tool {
		r := t.recorded[idx]
		rec = &r
	}
	answer := t.answer
	if rec == nil && tool == tools.ToolAwaitInput && answer != nil {
		t.answer = nil
	}
	t.mu.Unlock()
	pos := callPos{RunID: t.runID, Turn: t.turn, Index: idx}
	if rec == nil && !deferredLogTools[tool] {
		// This call's entry follows those written behind earlier calls.
		if err := t.calls.drain(); err != nil {
			return nil, err
		}
	}
	if rec != nil {
		return answerRecorded(idx, tool, args, rec)
	}
	if tool == tools.ToolAwaitInput && answer != nil {
		if err := logCall(t.self, tool, args, toolOutcome{Result: answer}, pos); err != nil {
			return nil, err
		}
		return answer, nil
	}
	res, err := t.c.callTool(ctx, t.self, tool, args, pos, t.calls)
	t.noteSuspended(err)
	return res, err
}

// noteSuspended records err if it suspended the run.
func (t *toolAttempt) noteSuspended(err error) {
	if !errors.Is(err, provider.ErrRunSuspended) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.suspended == nil {
		t.suspended = err
	}
}

// suspendedBy is the error of the call or gate that suspended the run, if
// any. The run's wait is logged by then, so the attempt ends suspended
// even when the provider answers otherwise: a session on a worker whose
// answer comes after the attempt's context ended (a cancel or the turn
// timeout during the worker's hand-back), or a worker that stopped.
func (t *toolAttempt) suspendedBy() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.suspended
}

// answerRecorded answers call idx from its record.
func answerRecorded(idx int, tool string, args map[string]any, rec *replayedCall) (map[string]any, error) {
	if rec.Error == "" && rec.Redo != nil {
		rec.Redo(args)
	}
	if rec.Error != "" {
		return tools.ErrorResult("%s", rec.Error), nil
	}
	result := map[string]any{}
	if len(rec.Result) > 0 {
		if err := json.Unmarshal(rec.Result, &result); err != nil {
			return nil, fmt.Errorf("the recorded result of call %d (%s) is malformed: %w", idx, tool, err)
		}
	}
	return result, nil
}

// batchableTools are the tools whose calls in one step run together.
var batchableTools = map[string]bool{tools.ToolSendMessage: true}

// CallTools implements provider.BatchToolCaller.
func (t *toolAttempt) CallTools(ctx context.Context, calls []provider.ToolRequest) []provider.ToolResponse {
	t.serial.Lock()
	defer t.serial.Unlock()
	together := len(calls) > 1
	for _, c := range calls {
		together = together && batchableTools[c.Tool]
	}
	t.mu.Lock()
	base := t.next
	if base < len(t.recorded) {
		together = false // a re-run: the log records calls of this step
	}
	if together {
		t.next += len(calls)
	}
	t.mu.Unlock()
	if together {
		if err := t.calls.drain(); err != nil {
			out := make([]provider.ToolResponse, len(calls))
			for i := range out {
				out[i].Err = err
			}
			return out
		}
		return t.callStep(ctx, calls, callPos{RunID: t.runID, Turn: t.turn, Index: base})
	}
	out := make([]provider.ToolResponse, len(calls))
	for i, c := range calls {
		out[i].Result, out[i].Err = t.callOne(ctx, c.Tool, c.Args)
		if out[i].Err != nil {
			for j := i + 1; j < len(calls); j++ {
				out[j].Err = fmt.Errorf("not run: call %d of this step failed: %w", i, out[i].Err)
			}
			break
		}
	}
	return out
}

// callStep runs the batchable calls of one step from position first.Index.
func (t *toolAttempt) callStep(ctx context.Context, calls []provider.ToolRequest, first callPos) []provider.ToolResponse {
	c, self := t.c, t.self
	out := make([]provider.ToolResponse, len(calls))
	fail := func(err error) []provider.ToolResponse {
		for i := range out {
			out[i] = provider.ToolResponse{Err: err}
		}
		return out
	}
	outs := make([]toolOutcome, len(calls))
	var checked []inbox.Message
	// Room the step's messages hold and do not use is given back.
	defer func() { c.unreserveAll(checked) }()
	for i, call := range calls {
		pos := first
		pos.Index = first.Index + i
		parsed, perr := c.parseTool(call.Tool, call.Args)
		if perr != nil {
			outs[i] = toolFailed("%v", perr)
			continue
		}
		o, err := c.execTool(ctx, self.ID(), parsed, pos)
		checked = append(checked, o.Deliver...)
		if err != nil {
			return fail(fmt.Errorf("tool %s for agent %s: %w", call.Tool, self.ID(), err))
		}
		outs[i] = o
	}
	if err := t.logStepAndDeliver(calls, outs, first); err != nil {
		return fail(err)
	}
	for i, o := range outs {
		if o.After != nil {
			o.After()
		}
		out[i].Result = o.Reply()
	}
	return out
}

// logStepAndDeliver logs the step's calls in the caller's log as one batch
// and their messages in the recipients' logs at the same time, and returns
// once all are durable.
func (t *toolAttempt) logStepAndDeliver(calls []provider.ToolRequest, outs []toolOutcome, first callPos) error {
	byRecipient := map[string][]inbox.Message{}
	var order []string
	for _, o := range outs {
		for _, m := range o.Deliver {
			if _, seen := byRecipient[m.Recipient]; !seen {
				order = append(order, m.Recipient)
			}
			byRecipient[m.Recipient] = append(byRecipient[m.Recipient], m)
		}
	}
	errs := make([]error, len(order))
	var wg sync.WaitGroup
	for i, to := range order {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, m := range byRecipient[to] {
				if errs[i] = t.c.appendMessage(m, nil); errs[i] != nil {
					return
				}
			}
		}()
	}
	recs := make([]eventlog.Record, len(calls))
	for i, call := range calls {
		recs[i] = callRecord(call.Tool, call.Args, outs[i], first)
	}
	var lerr error
	if _, err := t.self.AppendBatch(recs); err != nil {
		lerr = fmt.Errorf("logging %d tool.call entries for agent %s: %w", len(recs), t.self.ID(), err)
	}
	wg.Wait()
	return errors.Join(append(errs, lerr)...)
}
