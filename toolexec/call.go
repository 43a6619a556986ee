package toolexec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/tools"
)

// Log is the part of an agent's event log the tool.call entries go to;
// *eventlog.Log implements it.
type Log interface {
	Append(event string, data any) (eventlog.Entry, error)
	AppendBatch(recs []eventlog.Record) ([]eventlog.Entry, error)
}

// Caller is the agent a call is made for: its id and its log.
type Caller struct {
	ID  string
	Log Log
}

// CallOutside runs one call for an agent that runs no turn (the tool.call
// method with the operator's authority): parse, execute, log the tool.call
// entry and the messages, then answer. Tool-level failures are results.
func CallOutside(ctx context.Context, env Env, self Caller, tool string, args map[string]any) (map[string]any, error) {
	return call(ctx, env, self, tool, args, Outside, nil)
}

// call parses, executes and logs one call at pos. With deferred set, the
// tool.call entry of a deferredLogTools call is written behind the call.
func call(ctx context.Context, env Env, self Caller, tool string, args map[string]any, pos Pos, deferred *callLog) (map[string]any, error) {
	var out Outcome
	if parsed, perr := Parse(env, tool, args); perr != nil {
		out = failed("%v", perr)
	} else {
		var err error
		out, err = Exec(ctx, env, self.ID, parsed, pos)
		// Room the call's messages hold and do not use is given back.
		defer unreserve(env, out.Deliver)
		if err != nil {
			if errors.Is(err, provider.ErrRunSuspended) {
				return nil, err
			}
			return nil, fmt.Errorf("tool %s for agent %s: %w", tool, self.ID, err)
		}
	}
	if err := logCallAndDeliver(env, self, tool, args, out, pos, deferred); err != nil {
		return nil, err
	}
	if out.After != nil {
		out.After()
	}
	return out.Reply(), nil
}

// logCallAndDeliver logs the call in the caller's log and its messages in
// their recipients' logs at the same time, and returns once all are durable.
func logCallAndDeliver(env Env, self Caller, tool string, args map[string]any, out Outcome, pos Pos, deferred *callLog) error {
	errs := make([]error, len(out.Deliver))
	var wg sync.WaitGroup
	for i, m := range out.Deliver {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = env.Enqueue(m)
		}()
	}
	var err error
	if deferred != nil && deferredLogTools[tool] {
		err = deferred.add(callRecord(env, tool, args, out, pos))
	} else {
		err = logCall(env, self, tool, args, out, pos)
	}
	wg.Wait()
	return errors.Join(append(errs, err)...)
}

func logCall(env Clock, self Caller, tool string, args map[string]any, out Outcome, pos Pos) error {
	rec := callRecord(env, tool, args, out, pos)
	if _, err := self.Log.Append(rec.Event, rec.Data); err != nil {
		return fmt.Errorf("logging tool.call %s for agent %s: %w", tool, self.ID, err)
	}
	return nil
}

// Recorded is a call the log already records for a run.
type Recorded struct {
	Tool   string
	Result json.RawMessage // the recorded result object; empty for none
	Error  string
	// Redo redoes the call's idempotent effects when the call is answered
	// from the log (messages its recipients lack, a spawn not finished, a
	// completion); args are those of the call made again. May be nil.
	Redo func(args map[string]any)
}

// Attempt is the provider.ToolCaller of one attempt of a turn: every call
// a provider or the MCP bridge makes during the attempt goes through it.
// Calls the log already records for the run, at the same position and
// with the same tool, are answered from the record and not executed again.
type Attempt struct {
	env   Env
	self  Caller
	runID string
	turn  int

	mu       sync.Mutex
	next     int // the position of the next call
	recorded []Recorded
	resume   *string // answer to the run's pending await_input
	calls    *callLog
	// serial runs one call at a time, so positions, derived ids and the
	// order of tool.call entries agree when calls also arrive over the
	// socket.
	serial sync.Mutex
}

var (
	_ provider.ToolCaller      = (*Attempt)(nil)
	_ provider.BatchToolCaller = (*Attempt)(nil)
)

// Init readies a zero Attempt (the daemon embeds one in its per-attempt
// state, so an attempt costs no extra allocation) for the calls of one
// attempt of run runID's turn. recorded are the calls the log records for
// the run; resume, when not nil, answers the run's pending await_input.
// It must not be used on an Attempt that has taken calls.
func (t *Attempt) Init(env Env, self Caller, runID string, turn int, recorded []Recorded, resume *string) {
	t.env, t.self, t.runID, t.turn = env, self, runID, turn
	t.recorded, t.resume, t.calls = recorded, resume, newCallLog(self.Log)
}

// Drain waits until the tool.call entries written behind calls are
// durable, and returns the first write error (the log is poisoned then:
// the turn cannot complete). The end of an attempt is logged after it.
func (t *Attempt) Drain() error { return t.calls.drain() }

// CallTool implements provider.ToolCaller.
func (t *Attempt) CallTool(ctx context.Context, tool string, args map[string]any) (map[string]any, error) {
	t.serial.Lock()
	defer t.serial.Unlock()
	return t.callOne(ctx, tool, args)
}

// callOne runs one call; the caller holds t.serial.
func (t *Attempt) callOne(ctx context.Context, tool string, args map[string]any) (map[string]any, error) {
	t.mu.Lock()
	idx := t.next
	t.next++
	var rec *Recorded
	if idx < len(t.recorded) && t.recorded[idx].Tool == tool {
		r := t.recorded[idx]
		rec = &r
	}
	resume := t.resume
	if rec == nil && tool == tools.ToolAwaitInput && resume != nil {
		t.resume = nil
	}
	t.mu.Unlock()
	pos := Pos{RunID: t.runID, Turn: t.turn, Index: idx}
	if rec == nil && !deferredLogTools[tool] {
		// This call's entry follows those written behind earlier calls.
		if err := t.calls.drain(); err != nil {
			return nil, err
		}
	}
	if rec != nil {
		return t.answer(idx, tool, args, rec)
	}
	if tool == tools.ToolAwaitInput && resume != nil {
		result := map[string]any{"response": *resume}
		if err := logCall(t.env, t.self, tool, args, Outcome{Result: result}, pos); err != nil {
			return nil, err
		}
		return result, nil
	}
	return call(ctx, t.env, t.self, tool, args, pos, t.calls)
}

// answer answers call idx from its record.
func (t *Attempt) answer(idx int, tool string, args map[string]any, rec *Recorded) (map[string]any, error) {
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
