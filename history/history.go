package history

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/schema"
)

// Entry is one log entry, as the daemon converts it from the event log. Only
// the fields history needs are kept, so the package does not depend on the
// event log.
type Entry struct {
	Seq   uint64
	Event string
	Data  json.RawMessage
}

// History is what an agent's log says about its turns.
type History struct {
	// Turns are the completed turns (those with turn.complete), in log order,
	// each with the tool calls it made. Failed, cancelled and abandoned turns
	// are not included: the incomplete turn is rolled back.
	Turns []provider.Turn
	// Open is the latest turn that has a turn.start and no terminal event
	// yet, or nil.
	Open *OpenTurn
}

// OpenTurn is a turn that started and has not ended: it was running when the
// daemon stopped, or it is waiting for input.
type OpenTurn struct {
	RunID string
	Turn  int
	// Prompt is the prompt of the latest turn.start for this run and turn
	// (a re-run after a resume replaces it).
	Prompt string
	// Calls are the tool calls the turn has recorded, in order, including
	// the calls of earlier attempts of the same run and turn. A call with
	// neither Result nor Error began but has no recorded result.
	Calls []provider.ToolCall
	// CallIDs holds the call_id of each entry of Calls.
	CallIDs []string
	// StartSeq is the seq of the turn's first turn.start; Starts counts its
	// turn.start entries (more than 1 after re-runs).
	StartSeq uint64
	Starts   int
	// Interrupted is set by run.interrupted for this run, and cleared by
	// run.resumed or a new turn.start of the same run and turn.
	Interrupted bool
	// Reason is the run.interrupted reason (process_restart, wait_timeout).
	Reason string
	// Waiting is set by run.waiting and cleared by run.resumed or a new
	// turn.start; WaitPrompt, WaitKind and TokenID describe the wait.
	Waiting    bool
	WaitKind   string
	WaitPrompt string
	TokenID    string
}

// ErrMalformed is wrapped by every error about an entry whose data cannot be
// decoded.
var ErrMalformed = errors.New("malformed log entry")

// Event names read by this package (SPEC 3).
const (
	EventTurnStart      = schema.TurnStart
	EventTurnComplete   = schema.TurnComplete
	EventTurnFailed     = schema.TurnFailed
	EventTurnCancelled  = schema.TurnCancelled
	EventToolCall       = schema.ToolCall
	EventRunInterrupted = schema.RunInterrupted
	EventRunWaiting     = schema.RunWaiting
	EventRunResumed     = schema.RunResumed
	// EventContextReset (agent reset) starts the agent on a fresh context:
	// the turns before it are no longer history.
	EventContextReset = schema.ContextReset
)

type turnData struct {
	RunID    string `json:"run_id"`
	Turn     int    `json:"turn"`
	Prompt   string `json:"prompt"`
	Response string `json:"response"`
}

type runData struct {
	RunID    string `json:"run_id"`
	Reason   string `json:"reason"`
	WaitKind string `json:"wait_kind"`
	Prompt   string `json:"prompt"`
	TokenID  string `json:"token_id"`
}

type callData struct {
	CallID string          `json:"call_id"`
	Tool   string          `json:"tool"`
	Args   json.RawMessage `json:"args"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
	RunID  string          `json:"run_id"`
	Turn   int             `json:"turn"`
}

func decode(e Entry, v any) error {
	if len(bytes.TrimSpace(e.Data)) == 0 {
		return fmt.Errorf("%w: seq %d (%s) has no data; run `warren repair` if the log is damaged", ErrMalformed, e.Seq, e.Event)
	}
	if err := json.Unmarshal(e.Data, v); err != nil {
		return fmt.Errorf("%w: seq %d (%s): data does not decode: %w", ErrMalformed, e.Seq, e.Event, err)
	}
	return nil
}

// matches reports whether an event naming runID and turn refers to the open
// turn; empty or zero fields match anything.
func (o *OpenTurn) matches(runID string, turn int) bool {
	return o != nil && (runID == "" || runID == o.RunID) && (turn == 0 || turn == o.Turn)
}

// Build walks an agent's log entries in order and returns its history.
//
// Rules: turn.start opens a turn (a turn.start with the same run_id and turn
// as the open turn is a re-run: it replaces the prompt and keeps the
// recorded calls; any other turn.start abandons the open turn). tool.call
// attaches to the open turn when its run_id and turn match (calls with the
// same call_id are one call: a later record completes an earlier one).
// turn.complete closes the open turn into Turns; turn.failed and
// turn.cancelled drop it. context.reset forgets the turns before it.
// run.interrupted, run.waiting and run.resumed set
// and clear the open turn's flags. Terminal events that match no open turn
// and unknown events are ignored. Data that does not decode is an error
// wrapping ErrMalformed that names the seq.
func Build(entries []Entry) (History, error) {
	var b builder
	for _, e := range entries {
		if err := b.apply(e); err != nil {
			return History{}, err
		}
	}
	b.h.Open = b.open
	return b.h, nil
}

// builder is Build's state between entries.
type builder struct {
	h     History
	open  *OpenTurn
	index map[string]int // call_id -> position in open.Calls
}

// apply folds one entry.
func (b *builder) apply(e Entry) error {
	switch e.Event {
	case EventTurnStart:
		return b.turnStart(e)
	case EventToolCall:
		c, err := decodeCall(e)
		if err != nil {
			return err
		}
		if b.open.matches(c.RunID, c.Turn) {
			b.open.addCall(c, b.index)
		}
	case EventTurnComplete, EventTurnFailed, EventTurnCancelled:
		return b.turnEnd(e)
	case EventContextReset:
		b.h.Turns = nil
	case EventRunInterrupted, EventRunWaiting, EventRunResumed:
		return b.runFlags(e)
	}
	return nil
}

// turnStart opens a turn, or re-runs the open one when run and turn match.
func (b *builder) turnStart(e Entry) error {
	var d turnData
	if err := decode(e, &d); err != nil {
		return err
	}
	if o := b.open; o != nil && o.RunID == d.RunID && o.Turn == d.Turn {
		o.Prompt = d.Prompt
		o.Starts++
		o.Interrupted, o.Reason = false, ""
		o.Waiting = false
		return nil
	}
	b.open = &OpenTurn{RunID: d.RunID, Turn: d.Turn, Prompt: d.Prompt, StartSeq: e.Seq, Starts: 1}
	b.index = map[string]int{}
	return nil
}

// turnEnd closes the open turn it matches: into Turns for turn.complete,
// dropped for turn.failed and turn.cancelled.
func (b *builder) turnEnd(e Entry) error {
	var d turnData
	if err := decode(e, &d); err != nil {
		return err
	}
	if !b.open.matches(d.RunID, d.Turn) {
		return nil
	}
	if e.Event == EventTurnComplete {
		calls := b.open.Calls
		if calls == nil {
			calls = []provider.ToolCall{}
		}
		b.h.Turns = append(b.h.Turns, provider.Turn{Message: b.open.Prompt, Calls: calls, Response: d.Response})
	}
	b.open = nil
	return nil
}

// runFlags sets or clears the open turn's interruption and wait flags.
func (b *builder) runFlags(e Entry) error {
	var d runData
	if err := decode(e, &d); err != nil {
		return err
	}
	o := b.open
	if !o.matches(d.RunID, 0) {
		return nil
	}
	switch e.Event {
	case EventRunInterrupted:
		o.Interrupted, o.Reason = true, d.Reason
	case EventRunWaiting:
		o.Waiting, o.WaitKind, o.WaitPrompt, o.TokenID = true, d.WaitKind, d.Prompt, d.TokenID
	case EventRunResumed:
		o.Interrupted, o.Reason = false, ""
		o.Waiting = false
	}
	return nil
}

func (o *OpenTurn) addCall(c Call, index map[string]int) {
	if c.CallID != "" {
		if i, ok := index[c.CallID]; ok {
			o.Calls[i] = merge(o.Calls[i], c.ToolCall)
			return
		}
		index[c.CallID] = len(o.Calls)
	}
	o.Calls = append(o.Calls, c.ToolCall)
	o.CallIDs = append(o.CallIDs, c.CallID)
}

// merge completes an earlier record of a call with a later one.
func merge(old, upd provider.ToolCall) provider.ToolCall {
	if upd.Tool != "" {
		old.Tool = upd.Tool
	}
	if upd.Args != nil {
		old.Args = upd.Args
	}
	if HasResult(upd) {
		old.Result, old.Error = upd.Result, upd.Error
	}
	return old
}

// HasResult reports whether a recorded call has a result or an error, i.e.
// it finished; a call without either began but was interrupted.
func HasResult(c provider.ToolCall) bool {
	return c.Result != nil || c.Error != ""
}
