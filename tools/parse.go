package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/warren-dev/warren/internal/textcut"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/internal/suggest"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/tree"
)

// Errors callers test with errors.Is.
var (
	ErrUnknownTool  = errors.New("unknown tool")
	ErrUnknownParam = errors.New("unknown parameter")
	ErrMissingParam = errors.New("missing required parameter")
	ErrInvalidParam = errors.New("invalid parameter")
	ErrTooLong      = errors.New("parameter too long")
)

// ParamError is a problem with one argument of one tool call. Err is one of
// the sentinels above.
type ParamError struct {
	Tool  string
	Param string
	Err   error
	// Msg is the explanation after "<tool>: ".
	Msg string
}

func (e *ParamError) Error() string { return e.Tool + ": " + e.Msg }

// Unwrap returns the sentinel.
func (e *ParamError) Unwrap() error { return e.Err }

// ParseOptions is the parsing policy; the daemon sets it from its config.
// The zero value has no limits.
type ParseOptions struct {
	// MaxText is the longest string argument accepted, in bytes (every
	// string, including metadata keys and values); 0 = no limit.
	MaxText int
}

// Parse parses the arguments of a call to the named tool with no limits;
// see ParseOptions.Parse.
func Parse(name string, args map[string]any) (Call, error) {
	return ParseOptions{}.Parse(name, args)
}

// Parse checks args against the named tool's parameters and returns the
// typed call: SendMessage, Broadcast, CheckInbox, SpawnAgent, InspectAgent,
// Complete, Poke, RemindMe, CancelReminder, ListChildren, SetAgentMetadata,
// Subscribe, Unsubscribe, Gate, Ungate, PermitTurn or AwaitInput (values,
// not pointers; a type switch on the Call finds which). A nil args map is an empty one. Errors
// wrap ErrUnknownTool, or are a *ParamError wrapping ErrUnknownParam,
// ErrMissingParam, ErrInvalidParam or ErrTooLong.
func (o ParseOptions) Parse(name string, args map[string]any) (Call, error) {
	spec, ok := find(name)
	if !ok {
		return nil, fmt.Errorf("%w %q: the known tools are %s", ErrUnknownTool, clip(name), strings.Join(Names(), ", "))
	}
	a := &argReader{spec: spec, args: args, opts: o}
	a.checkUnknown()
	if a.err != nil {
		return nil, a.err
	}
	call := parseArgs(name, a)
	if a.err != nil {
		return nil, a.err
	}
	return call, nil
}

// parseArgs builds the typed call for a known tool.
func parseArgs(name string, a *argReader) Call {
	switch name {
	case ToolSendMessage:
		return SendMessage{Recipient: a.nonEmpty("recipient"), Text: a.nonEmpty("text")}
	case ToolBroadcast:
		return Broadcast{Text: a.nonEmpty("text")}
	case ToolCheckInbox:
		return parseCheckInbox(a)
	case ToolSpawnAgent:
		return parseSpawnAgent(a)
	case ToolInspectAgent:
		return InspectAgent{Name: a.nonEmpty("name")}
	case ToolComplete:
		return Complete{Result: a.str("result")}
	case ToolPoke:
		return Poke{AgentName: a.nonEmpty("agent_name")}
	case ToolRemindMe:
		return RemindMe{Reason: a.str("reason"), Timeout: a.seconds("timeout"), Every: a.seconds("every")}
	case ToolCancelReminder:
		return CancelReminder{ReminderID: a.nonEmpty("reminder_id")}
	case ToolListChildren:
		return ListChildren{}
	case ToolSetAgentMetadata:
		return SetAgentMetadata{AgentName: a.nonEmpty("agent_name"), Key: a.nonEmpty("key"), Value: a.nullableStr("value")}
	case ToolSubscribe:
		c := Subscribe{AgentName: a.nonEmpty("agent_name")}
		c.From, c.To = a.transition("transition")
		c.Once = a.boolean("once")
		return c
	case ToolUnsubscribe:
		return Unsubscribe{SubscriptionID: a.nonEmpty("subscription_id")}
	case ToolGate:
		return Gate{AgentName: a.nonEmpty("agent_name")}
	case ToolUngate:
		return Ungate{AgentName: a.nonEmpty("agent_name")}
	case ToolPermitTurn:
		return PermitTurn{AgentName: a.nonEmpty("agent_name")}
	case ToolMergeChild:
		return MergeChild{AgentName: a.nonEmpty("agent_name")}
	case ToolAwaitInput:
		return parseAwaitInput(a)
	}
	return nil // unreachable: name is in the catalog
}

// parseCheckInbox reads check_inbox: the kind, when given, must be known.
func parseCheckInbox(a *argReader) Call {
	c := CheckInbox{Sender: a.str("sender")}
	if k := a.str("kind"); k != "" && a.err == nil {
		kind, err := inbox.ParseKind(k)
		if err != nil {
			a.fail("kind", ErrInvalidParam, "parameter %q must be one of request, response, notification, error; got %q", "kind", clip(k))
		}
		c.Kind = kind
	}
	return c
}

// parseSpawnAgent reads spawn_agent: the name must be a valid agent name.
func parseSpawnAgent(a *argReader) Call {
	c := SpawnAgent{Name: a.nonEmpty("name")}
	if a.err == nil {
		if err := tree.ValidateName(c.Name); err != nil {
			a.fail("name", ErrInvalidParam, "parameter %q: %v", "name", err)
		}
	}
	c.Instructions = a.nonEmpty("instructions")
	c.Metadata = a.stringMap("metadata")
	c.Provider = a.str("provider")
	c.Model = a.str("model")
	c.Workspace = a.str("workspace")
	c.Budget = a.budget("budget")
	if a.err == nil && c.Workspace != "" && c.Workspace != "none" {
		a.fail("workspace", ErrInvalidParam, "parameter %q: %q is not \"none\" (leave it out for a workspace of the child's own)", "workspace", c.Workspace)
	}
	return c
}

// parseAwaitInput reads await_input: the kind is a short label.
func parseAwaitInput(a *argReader) Call {
	c := AwaitInput{Kind: a.nonEmpty("kind")}
	if a.err == nil && !schema.ValidName(c.Kind) {
		a.fail("kind", ErrInvalidParam,
			"parameter %q must be a short label (1-64 characters: a letter, then letters, digits, '_', '.', '-') such as approval or input; got %q",
			"kind", clip(c.Kind))
	}
	c.Prompt = a.nonEmpty("prompt")
	c.Timeout = a.seconds("timeout")
	return c
}

// argReader reads the arguments of one call; the first error sticks and
// later reads return zero values.
type argReader struct {
	spec *Spec
	args map[string]any
	opts ParseOptions
	err  error
}

func (a *argReader) fail(param string, sentinel error, format string, args ...any) {
	if a.err == nil {
		a.err = &ParamError{Tool: a.spec.Name, Param: param, Err: sentinel, Msg: fmt.Sprintf(format, args...)}
	}
}

func (a *argReader) checkUnknown() {
	var unknown []string
	for k := range a.args {
		if a.param(k) == nil {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return
	}
	slices.Sort(unknown)
	k := unknown[0]
	names := make([]string, len(a.spec.Params))
	for i, p := range a.spec.Params {
		names[i] = p.Name
	}
	takes := a.spec.Name + " takes no parameters"
	if len(names) > 0 {
		takes = a.spec.Name + " takes " + strings.Join(names, ", ")
	}
	if s := closest(k, names); s != "" {
		takes = fmt.Sprintf("did you mean %q? %s", s, takes)
	}
	a.fail(k, ErrUnknownParam, "unknown parameter %q; %s", clip(k), takes)
}

func (a *argReader) param(name string) *Param {
	for i := range a.spec.Params {
		if a.spec.Params[i].Name == name {
			return &a.spec.Params[i]
		}
	}
	return nil
}

// value returns the argument, or ok=false when it is absent or null (and
// records ErrMissingParam for a required parameter).
func (a *argReader) value(name string) (v any, ok bool) {
	if a.err != nil {
		return nil, false
	}
	v, present := a.args[name]
	if present && v != nil {
		return v, true
	}
	if p := a.param(name); p != nil && p.Required {
		how := "is missing"
		if present {
			how = "is null"
		}
		a.fail(name, ErrMissingParam, "required parameter %q %s; give a %s: %s", name, how, p.Type, p.Description)
	}
	return nil, false
}

func (a *argReader) wrongType(name, want string, v any) {
	a.fail(name, ErrInvalidParam, "parameter %q must be %s, got %s", name, want, describe(v))
}

func (a *argReader) checkLen(name, what, s string) bool {
	if a.opts.MaxText > 0 && len(s) > a.opts.MaxText {
		a.fail(name, ErrTooLong, "parameter %q: %s is %d bytes, over the limit of %d bytes; shorten it",
			name, what, len(s), a.opts.MaxText)
		return false
	}
	return true
}

// str reads a string parameter; absent, null and wrong-typed values give "".
func (a *argReader) str(name string) string {
	v, ok := a.value(name)
	if !ok {
		return ""
	}
	s, isStr := v.(string)
	if !isStr {
		a.wrongType(name, "a string", v)
		return ""
	}
	if !a.checkLen(name, "the value", s) {
		return ""
	}
	return s
}

// nonEmpty reads a string parameter that, when given, must not be "".
func (a *argReader) nonEmpty(name string) string {
	if a.err != nil {
		return ""
	}
	v, present := a.args[name]
	s := a.str(name)
	if a.err == nil && present && v != nil && s == "" {
		a.fail(name, ErrInvalidParam, "parameter %q must not be empty", name)
	}
	return s
}

func (a *argReader) nullableStr(name string) *string {
	if _, ok := a.value(name); !ok {
		return nil
	}
	s := a.str(name)
	if a.err != nil {
		return nil
	}
	return &s
}

func (a *argReader) boolean(name string) bool {
	v, ok := a.value(name)
	if !ok {
		return false
	}
	b, isBool := v.(bool)
	if !isBool {
		a.wrongType(name, "a boolean (true or false)", v)
	}
	return b
}

// maxSeconds keeps seconds*1e9 inside time.Duration.
const maxSeconds = float64(math.MaxInt64 / int64(time.Second))

// seconds reads a number of seconds, > 0, as a Duration.
func (a *argReader) seconds(name string) time.Duration {
	v, ok := a.value(name)
	if !ok {
		return 0
	}
	f, isNum := toFloat(v)
	if !isNum {
		a.wrongType(name, "a number of seconds", v)
		return 0
	}
	d := time.Duration(f * float64(time.Second))
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0):
		a.fail(name, ErrInvalidParam, "parameter %q must be a finite number of seconds, got %v", name, f)
	case f > maxSeconds:
		a.fail(name, ErrInvalidParam, "parameter %q must be at most %d seconds, got %v", name, int64(maxSeconds), f)
	case f <= 0 || d <= 0:
		a.fail(name, ErrInvalidParam, "parameter %q must be a number of seconds greater than 0, got %v", name, f)
	default:
		return d
	}
	return 0
}

// toFloat accepts the numeric forms decoders produce: float64 (encoding/json),
// json.Number (UseNumber), Go integer types (msgpack, hand-built maps).
func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case int:
		return float64(n), true
	case int8:
		return float64(n), true
	case int16:
		return float64(n), true
	case int32:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint:
		return float64(n), true
	case uint8:
		return float64(n), true
	case uint16:
		return float64(n), true
	case uint32:
		return float64(n), true
	case uint64:
		return float64(n), true
	case json.Number:
		f, err := strconv.ParseFloat(string(n), 64)
		return f, err == nil
	}
	return 0, false
}

// stringMap reads an object whose values are strings.
func (a *argReader) stringMap(name string) map[string]string {
	v, ok := a.value(name)
	if !ok {
		return nil
	}
	out := map[string]string{}
	switch m := v.(type) {
	case map[string]string:
		for k, s := range m {
			out[k] = s
		}
	case map[string]any:
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			s, isStr := m[k].(string)
			if !isStr {
				a.fail(name, ErrInvalidParam, "parameter %q must be an object of strings; key %q is %s", name, clip(k), describe(m[k]))
				return nil
			}
			out[k] = s
		}
	default:
		a.wrongType(name, "an object of string values", v)
		return nil
	}
	keys := make([]string, 0, len(out))
	for k := range out {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if k == "" {
			a.fail(name, ErrInvalidParam, "parameter %q has an empty key; keys must be non-empty", name)
			return nil
		}
		if !a.checkLen(name, fmt.Sprintf("key %q", clip(k)), k) || !a.checkLen(name, fmt.Sprintf("the value of key %q", clip(k)), out[k]) {
			return nil
		}
	}
	return out
}

var states = []string{StateIdle, StateBusy, StateWaiting, StateTerminated, StateAny}

// transition reads "from->to".
func (a *argReader) transition(name string) (from, to string) {
	s := a.nonEmpty(name)
	if a.err != nil || s == "" {
		return "", ""
	}
	f, t, found := strings.Cut(s, "->")
	f, t = strings.TrimSpace(f), strings.TrimSpace(t)
	if !found || !slices.Contains(states, f) || !slices.Contains(states, t) {
		a.fail(name, ErrInvalidParam,
			`parameter %q must be "from->to" with each state one of idle, busy, waiting, terminated or *, e.g. "busy->idle"; got %q`,
			name, clip(s))
		return "", ""
	}
	return f, t
}

// describe names a value's JSON type for error messages.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return fmt.Sprintf("string %q", clip(x))
	case bool:
		return fmt.Sprintf("boolean %v", x)
	case map[string]any, map[string]string:
		return "an object"
	case []any:
		return "an array"
	}
	if f, ok := toFloat(v); ok {
		return fmt.Sprintf("number %v", f)
	}
	return fmt.Sprintf("a value of type %T", v)
}

func clip(s string) string { return textcut.Cut(s, 64, "...") }

// closest returns the candidate within edit distance 2 of s.
func closest(s string, candidates []string) string { return suggest.Closest(s, candidates, 2) }

// budget reads a budget object (schema.ParseBudget).
func (a *argReader) budget(name string) *schema.BudgetSetData {
	v, ok := a.value(name)
	if !ok {
		return nil
	}
	m, isObj := v.(map[string]any)
	if !isObj {
		a.wrongType(name, `an object such as {"tokens": 200000}`, v)
		return nil
	}
	b, err := schema.ParseBudget(m)
	if err != nil {
		a.fail(name, ErrInvalidParam, "parameter %q: %v", name, err)
		return nil
	}
	return b
}
