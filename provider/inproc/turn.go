package inproc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
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
	// AgentID, Model and Instructions come from the session's spec.
	AgentID      string
	Model        string
	Instructions string
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
	t.mu.Lock()
	over := t.over
	t.mu.Unlock()
	if over {
		return nil, fmt.Errorf("inproc tool call %q: %w", tool, ErrTurnOver)
	}
	if t.tio.Tools == nil {
		return nil, fmt.Errorf("inproc tool call %q: the turn has no tool caller", tool)
	}
	if args == nil {
		args = map[string]any{}
	}
	res, err := t.tio.Tools.CallTool(t.ctx, tool, args)

	rec := provider.ToolCall{Tool: tool, Args: maps.Clone(args)}
	switch {
	case err != nil:
		rec.Error = err.Error()
	case res != nil && res["error"] != nil:
		rec.Error = errorText(res["error"])
	default:
		rec.Result = maps.Clone(res)
		if rec.Result == nil {
			rec.Result = map[string]any{}
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.over {
		return nil, fmt.Errorf("inproc tool call %q: %w", tool, ErrTurnOver)
	}
	if err != nil && errors.Is(err, provider.ErrRunSuspended) {
		if t.suspendErr == nil {
			t.suspendErr = err
		}
		return nil, err
	}
	t.calls = append(t.calls, rec)
	return res, err
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

// errorText renders a tool result's "error" value as text.
func errorText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
