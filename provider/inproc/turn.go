package inproc

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"

	"github.com/warren-dev/warren/provider"
)

// Program is the behaviour of an inproc model: it runs one turn and returns
// the response. It must honour ctx (the turn's context).
type Program func(ctx context.Context, t *Turn) (string, error)

// Turn is what a Program sees of the turn it runs.
type Turn struct {
	// Prompt is the message sent to the session.
	Prompt string
	// History holds the turns this session has completed, oldest first:
	// kept in memory, restored from a suspend blob or a native resume, or
	// empty for a fresh session. It is shared with the session: read it,
	// do not modify it.
	History []provider.Turn
	// AgentID, Model, Instructions and Cwd come from the session's spec.
	AgentID      string
	Model        string
	Instructions string
	Cwd          string
	// Handle is the session's handle.
	Handle string

	ctx context.Context
	tio provider.TurnIO

	mu         sync.Mutex
	over       bool
	chunked    bool
	calls      []provider.ToolCall
	suspendErr error
}

// Call runs an agent tool through the turn's TurnIO.Tools and records the
// call for the session's history. A tool-level failure is a result with an
// "error" key (recorded as the call's Error). An error wrapping
// provider.ErrRunSuspended ends the turn: the program should return it (Send
// returns it even if the program does not). After the turn is over Call
// returns ErrTurnOver.
func (t *Turn) Call(tool string, args map[string]any) (map[string]any, error) {
	if err := t.callable("tool call " + strconv.Quote(tool)); err != nil {
		return nil, err
	}
	if args == nil {
		args = map[string]any{}
	}
	res, err := t.tio.Tools.CallTool(t.ctx, tool, args)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.over {
		return nil, fmt.Errorf("inproc tool call %q: %w", tool, ErrTurnOver)
	}
	return res, t.record(provider.ToolRequest{Tool: tool, Args: args}, res, err)
}

// CallBatch runs the tool calls of one model step, as a model emitting
// several tool-use blocks in one message. If the turn's tool caller is a
// provider.BatchToolCaller it may run them together; otherwise they run one
// by one, stopping at the first Go error. Calls are recorded in request
// order. The error is the first call's Go error, with Call's meaning.
func (t *Turn) CallBatch(calls []provider.ToolRequest) ([]map[string]any, error) {
	bt, ok := t.tio.Tools.(provider.BatchToolCaller)
	if !ok {
		out := make([]map[string]any, len(calls))
		for i, c := range calls {
			r, err := t.Call(c.Tool, c.Args)
			if err != nil {
				return out, err
			}
			out[i] = r
		}
		return out, nil
	}
	if err := t.callable("tool calls"); err != nil {
		return nil, err
	}
	reqs := make([]provider.ToolRequest, len(calls))
	for i, c := range calls {
		reqs[i] = c
		if reqs[i].Args == nil {
			reqs[i].Args = map[string]any{}
		}
	}
	resps := bt.CallTools(t.ctx, reqs)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.over {
		return nil, fmt.Errorf("inproc tool calls: %w", ErrTurnOver)
	}
	out := make([]map[string]any, len(reqs))
	var first error
	for i, r := range resps {
		out[i] = r.Result
		if err := t.record(reqs[i], r.Result, r.Err); err != nil && first == nil {
			first = err
		}
	}
	return out, first
}

// callable fails when the turn is over or has no tool caller.
func (t *Turn) callable(what string) error {
	t.mu.Lock()
	over := t.over
	t.mu.Unlock()
	if over {
		return fmt.Errorf("inproc %s: %w", what, ErrTurnOver)
	}
	if t.tio.Tools == nil {
		return fmt.Errorf("inproc %s: the turn has no tool caller", what)
	}
	return nil
}

// record notes a call's outcome for the history and returns err. A call
// that suspended the run is not recorded (the daemon re-runs the turn on
// resume); it marks the turn suspended. t.mu must be held.
func (t *Turn) record(req provider.ToolRequest, res map[string]any, err error) error {
	if err != nil && errors.Is(err, provider.ErrRunSuspended) {
		if t.suspendErr == nil {
			t.suspendErr = err
		}
		return err
	}
	rec := provider.ToolCall{Tool: req.Tool, Args: maps.Clone(req.Args)}
	switch {
	case err != nil:
		rec.Error = err.Error()
	case res != nil && res["error"] != nil:
		rec.Error = provider.ToolErrorText(res["error"])
	default:
		rec.Result = maps.Clone(res)
		if rec.Result == nil {
			rec.Result = map[string]any{}
		}
	}
	t.calls = append(t.calls, rec)
	return err
}

// Chunk streams text to the daemon through TurnIO.OnChunk. Chunks emitted
// after the turn is over are dropped.
func (t *Turn) Chunk(text string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.over {
		return
	}
	t.chunked = true
	if t.tio.OnChunk != nil {
		t.tio.OnChunk(text)
	}
}

// finish ends the turn and returns what it recorded.
func (t *Turn) finish() (calls []provider.ToolCall, suspendErr error, chunked bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.over = true
	if t.calls == nil {
		t.calls = []provider.ToolCall{}
	}
	return t.calls, t.suspendErr, t.chunked
}

// Request stands for one model request of the turn, as an HTTP provider
// makes them: it passes TurnIO.BeforeRequest (whose error, a spent budget
// among them, the program should return) and then reports u through
// TurnIO.OnUsage.
func (t *Turn) Request(u provider.Usage) error {
	t.mu.Lock()
	over := t.over
	t.mu.Unlock()
	if over {
		return ErrTurnOver
	}
	if t.tio.BeforeRequest != nil {
		if err := t.tio.BeforeRequest(); err != nil {
			return err
		}
	}
	// The usage is reported under the lock finish takes, as Chunk does: a
	// cancelled turn's Send returns after finish, and nothing of the turn
	// reaches its TurnIO after that.
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.over {
		return ErrTurnOver
	}
	if t.tio.OnUsage != nil && !u.IsZero() {
		t.tio.OnUsage(u)
	}
	return nil
}
