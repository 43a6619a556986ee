package scripted

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/warren-dev/warren/provider"
)

// resultData and resultError are the daemon-to-program result lines.
type resultData struct {
	Type string          `json:"type"`
	ID   json.RawMessage `json:"id"`
	Data map[string]any  `json:"data"`
}

type resultError struct {
	Type  string          `json:"type"`
	ID    json.RawMessage `json:"id"`
	Error string          `json:"error"`
}

// call handles one call line: it runs the tool, answers with a result line
// and returns the call to record (nil for a malformed call, which is
// answered with an error and not executed). An error ends the turn.
func (t *turn) call(fields map[string]json.RawMessage) (*provider.ToolCall, error) {
	id := fields["id"]
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	var tool string
	if raw, ok := fields["tool"]; !ok || json.Unmarshal(raw, &tool) != nil || tool == "" {
		return nil, t.answerError(id, "invalid call line: \"tool\" must be a non-empty string")
	}
	args := map[string]any{}
	if raw, ok := fields["args"]; ok && string(raw) != "null" {
		var a map[string]any
		if err := json.Unmarshal(raw, &a); err != nil || a == nil {
			return nil, t.answerError(id, fmt.Sprintf("invalid call line: \"args\" of tool %q must be a JSON object", tool))
		}
		args = a
	}
	rec := &provider.ToolCall{Tool: tool, Args: maps.Clone(args)}

	start := time.Now()
	var res map[string]any
	var err error
	if t.tio.Tools == nil {
		err = errors.New("no tool caller for this turn (no daemon connection)")
	} else {
		res, err = t.tio.Tools.CallTool(t.ctx, tool, args)
	}
	// The daemon's time running the tool does not count against the
	// program's turn timeout.
	if !t.deadline.IsZero() {
		t.deadline = t.deadline.Add(time.Since(start))
	}

	switch {
	case err != nil && errors.Is(err, provider.ErrRunSuspended):
		// The program is mid-call and cannot be answered: end it.
		t.s.drop(t.proc)
		t.proc.teardown()
		t.s.log.Debug("run suspended by a tool call; process killed", "tool", tool, "pid", t.proc.pid)
		return nil, err
	case t.ctx.Err() != nil:
		return nil, t.fail(t.ctx.Err())
	case err != nil:
		rec.Error = err.Error()
	case res != nil && res["error"] != nil:
		rec.Error = provider.ToolErrorText(res["error"])
	default:
		if res == nil {
			res = map[string]any{}
		}
		line, mErr := json.Marshal(resultData{Type: "result", ID: id, Data: res})
		if mErr != nil {
			rec.Error = fmt.Sprintf("the result of tool %q cannot be encoded as JSON: %v", tool, mErr)
			break
		}
		rec.Result = maps.Clone(res)
		if err := t.send(line); err != nil {
			return nil, err
		}
		return rec, nil
	}
	if err := t.answerError(id, rec.Error); err != nil {
		return nil, err
	}
	return rec, nil
}

// answerError writes an error result line.
func (t *turn) answerError(id json.RawMessage, text string) error {
	line, err := json.Marshal(resultError{Type: "result", ID: id, Error: text})
	if err != nil {
		// Only an invalid id could fail, and ids come from parsed JSON.
		return provider.Permanent(fmt.Errorf("scripted: encoding a result line: %w", err))
	}
	return t.send(line)
}

// send writes a line under the turn deadline.
func (t *turn) send(line []byte) error {
	if err := t.arm(); err != nil {
		return t.fail(err)
	}
	if err := t.flush(); err != nil {
		return t.fail(err)
	}
	if err := t.proc.writeLine(line); err != nil {
		return t.fail(err)
	}
	return nil
}
