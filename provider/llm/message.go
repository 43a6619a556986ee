package llm

import (
	"encoding/json"
	"fmt"

	"github.com/warren-dev/warren/provider"
)

// Role is the author of a Message.
type Role string

// Roles. Tool results are RoleTool messages; each wire maps them to its own
// shape (OpenAI: one "tool" message per result; Anthropic: a user message of
// tool_result blocks).
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one wire-independent conversation message.
type Message struct {
	Role Role
	// Text is the message text (user text, or assistant text before its
	// tool calls).
	Text string
	// Calls are an assistant message's tool calls.
	Calls []Call
	// Results are a tool message's results, in call order.
	Results []Result
}

// Call is one tool call a model made.
type Call struct {
	ID   string
	Name string
	// Args is the arguments as the model sent them: a JSON object's text
	// (possibly invalid JSON when the model produced garbage).
	Args string
	// ArgsBytes, when not 0, is the size of arguments that were over the
	// limit and dropped as they arrived (Args is then "").
	ArgsBytes int
}

// Result is the outcome of one Call.
type Result struct {
	CallID string
	Name   string
	// Content is the result as JSON (the tool's result object, or
	// {"error": "..."}).
	Content string
	// IsError marks a tool-level failure; ErrText is its text.
	IsError bool
	ErrText string
}

// HistoryCallID is the tool-call id given to a call replayed from the log:
// derived from its call_id, so every request (and every provider type:
// the form is valid for OpenAI and Anthropic) carries the same id for it.
// turn and n (the call's position) name calls without a call_id.
func HistoryCallID(c provider.ToolCall, turn, n int) string {
	if c.ID != "" {
		return "call_" + c.ID
	}
	return fmt.Sprintf("call_h%d_%d", turn, n)
}

// TurnMessages converts a completed turn into its native message shape: the
// user message; when it made tool calls, one assistant message carrying
// them all and one tool message with their results; then the final
// assistant text (left out when empty). turn is the turn's index in the
// history, for call ids.
func TurnMessages(t provider.Turn, turn int) []Message {
	out := []Message{{Role: RoleUser, Text: t.Message}}
	if len(t.Calls) > 0 {
		calls := make([]Call, len(t.Calls))
		results := make([]Result, len(t.Calls))
		for i, c := range t.Calls {
			id := HistoryCallID(c, turn, i)
			args := "{}"
			if c.Args != nil {
				if b, err := json.Marshal(c.Args); err == nil {
					args = string(b)
				}
			}
			calls[i] = Call{ID: id, Name: c.Tool, Args: args}
			switch {
			case c.Error != "":
				results[i] = ErrorResult(id, c.Tool, c.Error)
			case c.Result != nil:
				results[i] = ValueResult(id, c.Tool, c.Result)
			default:
				results[i] = ErrorResult(id, c.Tool, "interrupted: this call began but never finished")
			}
		}
		out = append(out, Message{Role: RoleAssistant, Calls: calls}, Message{Role: RoleTool, Results: results})
	}
	if t.Response != "" {
		out = append(out, Message{Role: RoleAssistant, Text: t.Response})
	}
	return out
}

// ValueResult is a successful result. A result object holding "error" (a
// tool-level failure as the daemon reports it) becomes an error result.
func ValueResult(callID, name string, v map[string]any) Result {
	if e, ok := v["error"]; ok && len(v) == 1 {
		if s, ok := e.(string); ok {
			return ErrorResult(callID, name, s)
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return ErrorResult(callID, name, fmt.Sprintf("the result could not be encoded: %v", err))
	}
	return Result{CallID: callID, Name: name, Content: string(b)}
}

// ErrorResult is a tool-level failure.
func ErrorResult(callID, name, text string) Result {
	b, _ := json.Marshal(map[string]string{"error": text})
	return Result{CallID: callID, Name: name, Content: string(b), IsError: true, ErrText: text}
}
