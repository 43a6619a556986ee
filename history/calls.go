package history

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/warren-dev/warren/provider"
)

// Call is one recorded tool call with where it sits in the log.
type Call struct {
	provider.ToolCall
	CallID string
	RunID  string
	Turn   int
	// Seq is the seq of the call's first tool.call entry.
	Seq uint64
}

// Done reports whether the call has a recorded result or error.
func (c Call) Done() bool { return HasResult(c.ToolCall) }

func decodeCall(e Entry) (Call, error) {
	var d callData
	if err := decode(e, &d); err != nil {
		return Call{}, err
	}
	c := Call{CallID: d.CallID, RunID: d.RunID, Turn: d.Turn, Seq: e.Seq}
	c.Tool = d.Tool
	c.ID = d.CallID
	var err error
	if c.Args, err = object(d.Args); err != nil {
		return Call{}, fmt.Errorf("%w: seq %d (tool.call): args: %w", ErrMalformed, e.Seq, err)
	}
	if c.Result, err = object(d.Result); err != nil {
		return Call{}, fmt.Errorf("%w: seq %d (tool.call): result: %w", ErrMalformed, e.Seq, err)
	}
	c.Error = text(d.Error)
	return c, nil
}

// object decodes a JSON object; null or absent is nil, and any other value v
// is kept as {"value": v} so that nothing recorded is lost.
func object(raw json.RawMessage) (map[string]any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	if raw[0] == '{' {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, err
		}
		return m, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	return map[string]any{"value": v}, nil
}

// text decodes a JSON string; another JSON value is kept as its JSON text.
func text(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// RunCalls returns the tool calls recorded for run runID, in log order,
// across all its turns and re-runs. Records with the same call_id are one
// call (a later record completes an earlier one). A tool.call without a
// run_id belongs to the run whose turn is open at that point of the log.
// Entries whose data does not decode are skipped (Build reports them).
// Kept for tests, as RecordedCalls.
func RunCalls(entries []Entry, runID string) []Call {
	var out []Call
	index := map[string]int{}
	current, currentTurn := "", 0 // run and turn of the open turn
	for _, e := range entries {
		switch e.Event {
		case EventTurnStart:
			var d turnData
			if decode(e, &d) == nil {
				current, currentTurn = d.RunID, d.Turn
			}
		case EventTurnComplete, EventTurnFailed, EventTurnCancelled:
			var d turnData
			if decode(e, &d) == nil && (d.RunID == "" || d.RunID == current) {
				current, currentTurn = "", 0
			}
		case EventToolCall:
			c, err := decodeCall(e)
			if err != nil {
				continue
			}
			if c.RunID == "" {
				c.RunID = current
				if c.Turn == 0 {
					c.Turn = currentTurn
				}
			}
			if c.RunID != runID || runID == "" {
				continue
			}
			if c.CallID != "" {
				if i, ok := index[c.CallID]; ok {
					out[i].ToolCall = merge(out[i].ToolCall, c.ToolCall)
					continue
				}
				index[c.CallID] = len(out)
			}
			out = append(out, c)
		}
	}
	return out
}

// RecordedCalls returns the tool calls recorded for run runID in order (SPEC
// 4, replayed tool calls). See RunCalls for the rules. Kept for this
// package's tests: the daemon reads the recorded calls from the projection
// (see the package doc).
func RecordedCalls(entries []Entry, runID string) []provider.ToolCall {
	calls := RunCalls(entries, runID)
	out := make([]provider.ToolCall, len(calls))
	for i, c := range calls {
		out[i] = c.ToolCall
	}
	return out
}
