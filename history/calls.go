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

// RecordedCalls returns the tool calls recorded for run runID in order, for
// answering a re-run's calls from the log (SPEC 4, replayed tool calls). See
// RunCalls for the rules; Replayer applies them position by position.
func RecordedCalls(entries []Entry, runID string) []provider.ToolCall {
	calls := RunCalls(entries, runID)
	out := make([]provider.ToolCall, len(calls))
	for i, c := range calls {
		out[i] = c.ToolCall
	}
	return out
}

// Replayer answers the tool calls of a re-run from the calls the log
// records for the run: the call at position k of the re-run is answered from
// the recorded call at position k when it is the same tool and has a result
// or error. It is not safe for concurrent use (one run makes one call at a
// time).
type Replayer struct {
	calls    []Call
	next     int
	diverged bool
}

// NewReplayer returns a Replayer over the recorded calls of a run (from
// RunCalls).
func NewReplayer(calls []Call) *Replayer {
	return &Replayer{calls: calls}
}

// Next is called for each tool call the re-run makes, in order. It returns
// the recorded call at this position and whether to answer from it
// (replay=true: do not execute, use its Result or Error).
//
// When replay is false the call must be executed. If rec.CallID is not
// empty, the position holds a record of the same tool without a result (the
// call began and was interrupted): log the execution under that call_id so
// it completes the record instead of shifting later positions. Once a call
// differs in tool from the record at its position, or runs past the
// recorded calls, the re-run has diverged and every later call is executed.
func (r *Replayer) Next(tool string) (rec Call, replay bool) {
	if r.diverged || r.next >= len(r.calls) {
		r.diverged = true
		return Call{}, false
	}
	c := r.calls[r.next]
	if c.Tool != tool {
		r.diverged = true
		return Call{}, false
	}
	r.next++
	return c, c.Done()
}

// Replayed reports how many positions have been consumed so far.
func (r *Replayer) Replayed() int { return r.next }
