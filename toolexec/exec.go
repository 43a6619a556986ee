package toolexec

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/tools"
)

// Pos places a call: inside a run (RunID set), at position Index of its
// turn's calls, or outside any run (RunID "", Index -1: a tool.call made
// while the agent runs no turn).
type Pos struct {
	RunID string
	Turn  int
	Index int
}

// Outside is the position of a call made outside any run.
var Outside = Pos{Index: -1}

// derivedID is a deterministic id for an effect of a call inside a run, so
// a call executed again after a crash produces the same message or child
// id; outside a run it is a fresh id.
func derivedID(env Clock, pos Pos, kind, key string) string {
	if pos.RunID == "" {
		return env.NewID()
	}
	h := sha256.Sum256([]byte(pos.RunID + "|" + strconv.Itoa(pos.Turn) + "|" + strconv.Itoa(pos.Index) + "|" + kind + "|" + key))
	return hex.EncodeToString(h[:16])
}

// Outcome is what a tool returns: the result (or a tool-level error) and
// the messages it sent, recorded with the call.
type Outcome struct {
	Result map[string]any
	// Err is a tool-level failure: the result is {"error": Err}.
	Err string
	// Messages are the envelopes of the messages sent, recorded in the
	// call's tool.call entry.
	Messages []map[string]any
	// Deliver are messages to log in their recipients' logs, concurrently
	// with the call's own tool.call entry.
	Deliver []inbox.Message
	// After runs once the call is logged (e.g. terminating an agent that
	// completed outside a turn, which closes its log).
	After func()
}

// Reply is the result the caller sees.
func (o Outcome) Reply() map[string]any {
	if o.Err != "" {
		return tools.ErrorResult("%s", o.Err)
	}
	return o.Result
}

func failed(format string, args ...any) Outcome {
	return Outcome{Err: fmt.Sprintf(format, args...)}
}

func done(result map[string]any) Outcome { return Outcome{Result: result} }

// callRecord is the tool.call entry of one call.
func callRecord(env Clock, tool string, args map[string]any, o Outcome, pos Pos) eventlog.Record {
	return eventlog.Record{Event: schema.ToolCall, Data: schema.ToolCallData{CallID: env.NewID(), Tool: tool, Args: args,
		Result: o.Result, Error: o.Err, RunID: pos.RunID, Turn: pos.Turn, Messages: o.Messages}}
}

// Parse parses a call's arguments with the limits in force.
func Parse(env Clock, tool string, args map[string]any) (tools.Call, error) {
	return tools.ParseOptions{MaxText: env.Limits().MessageBytes}.Parse(tool, args)
}

// Exec runs a parsed call for agent self at pos and returns its outcome,
// nothing of it logged yet. An error is a failure of the call itself (a
// log write failed, or provider.ErrRunSuspended from await_input), not a
// tool-level error.
func Exec(ctx context.Context, env Env, self string, call tools.Call, pos Pos) (Outcome, error) {
	x := exec{env: env, self: self, pos: pos}
	switch v := call.(type) {
	case tools.SendMessage:
		return x.sendMessage(v)
	case tools.Broadcast:
		return x.broadcast(v)
	case tools.CheckInbox:
		return x.checkInbox(v)
	case tools.SpawnAgent:
		return x.spawn(v)
	case tools.InspectAgent:
		return x.inspect(v)
	case tools.Complete:
		return x.complete(v)
	case tools.Poke:
		return x.poke(v)
	case tools.RemindMe:
		return x.remindMe(v)
	case tools.CancelReminder:
		return x.cancelReminder(v)
	case tools.ListChildren:
		return x.listChildren()
	case tools.SetAgentMetadata:
		return x.setMetadata(v)
	case tools.Subscribe:
		return x.subscribe(v)
	case tools.Unsubscribe:
		return x.unsubscribe(v)
	case tools.Gate:
		return x.gate(v.AgentName, true)
	case tools.Ungate:
		return x.gate(v.AgentName, false)
	case tools.PermitTurn:
		return x.permit(v)
	case tools.AwaitInput:
		return x.awaitInput(v)
	}
	return failed("tool %T is not implemented", call), nil
}

// exec is one call being executed.
type exec struct {
	env  Env
	self string
	pos  Pos
}

func (x exec) derivedID(kind, key string) string { return derivedID(x.env, x.pos, kind, key) }

func (x exec) newMessage(id, recipient string, kind inbox.Kind, payload string) inbox.Message {
	return NewMessage(x.env, id, x.self, recipient, kind, payload)
}

// NewMessage is a message stamped with env's clock (any Now will do: the
// engine's notices use it too).
func NewMessage(env interface{ Now() time.Time }, id, sender, recipient string, kind inbox.Kind, payload string) inbox.Message {
	return inbox.Message{ID: id, Sender: sender, Recipient: recipient, Kind: kind, Payload: payload,
		Timestamp: env.Now().UTC(), Metadata: map[string]string{}}
}
