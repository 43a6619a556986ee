package tools

import (
	"maps"
	"slices"

	"github.com/warren-dev/warren/schema"
)

// Tool names.
const (
	ToolSendMessage      = "send_message"
	ToolBroadcast        = "broadcast"
	ToolCheckInbox       = "check_inbox"
	ToolSpawnAgent       = "spawn_agent"
	ToolInspectAgent     = "inspect_agent"
	ToolComplete         = "complete"
	ToolPoke             = "poke"
	ToolRemindMe         = "remind_me"
	ToolCancelReminder   = "cancel_reminder"
	ToolListChildren     = "list_children"
	ToolSetAgentMetadata = "set_agent_metadata"
	ToolSubscribe        = "subscribe"
	ToolUnsubscribe      = "unsubscribe"
	ToolGate             = "gate"
	ToolUngate           = "ungate"
	ToolPermitTurn       = "permit_turn"
	ToolAwaitInput       = "await_input"
	ToolMergeChild       = "merge_child"
)

// Parameter types.
const (
	TypeString  = "string"
	TypeNumber  = "number"
	TypeBoolean = "boolean"
	TypeObject  = "object"
)

// Subscription states: the agent states a transition names, and "*" for
// any (the log's vocabulary, package schema).
const (
	StateIdle       = schema.StateIdle
	StateBusy       = schema.StateBusy
	StateWaiting    = schema.StateWaiting
	StateTerminated = schema.StateTerminated
	StateAny        = schema.StateAny
)

// Param describes one tool parameter.
type Param struct {
	Name        string
	Type        string // TypeString, TypeNumber, TypeBoolean or TypeObject
	Description string
	Required    bool
	// Enum lists the allowed values of a string parameter (nil: any).
	Enum []string
	// Nullable: null is a meaningful value, not just "absent".
	Nullable bool

	// extra returns further JSON Schema keywords for the property, freshly
	// allocated on each call so no caller shares them.
	extra func() map[string]any
}

// Spec describes one tool.
type Spec struct {
	Name        string
	Description string
	Params      []Param
}

func (p Param) clone() Param {
	p.Enum = slices.Clone(p.Enum)
	return p
}

func (s Spec) clone() Spec {
	ps := make([]Param, len(s.Params))
	for i, p := range s.Params {
		ps[i] = p.clone()
	}
	s.Params = ps
	return s
}

// Catalog returns every tool, in a fixed order. The result is the caller's
// to keep or change.
func Catalog() []Spec {
	out := make([]Spec, len(catalog))
	for i, s := range catalog {
		out[i] = s.clone()
	}
	return out
}

// Names returns the tool names in catalog order.
func Names() []string {
	out := make([]string, len(catalog))
	for i, s := range catalog {
		out[i] = s.Name
	}
	return out
}

// Lookup returns the spec of the named tool.
func Lookup(name string) (Spec, bool) {
	s, ok := find(name)
	if !ok {
		return Spec{}, false
	}
	return s.clone(), true
}

// find returns the shared, read-only spec.
func find(name string) (*Spec, bool) {
	for i := range catalog {
		if catalog[i].Name == name {
			return &catalog[i], true
		}
	}
	return nil, false
}

// JSONSchema returns the MCP-style inputSchema of the tool: a JSON Schema
// object with properties, required and additionalProperties false.
func (s Spec) JSONSchema() map[string]any {
	props := make(map[string]any, len(s.Params))
	var required []string
	for _, p := range s.Params {
		prop := map[string]any{"type": p.Type, "description": p.Description}
		if p.Nullable {
			prop["type"] = []string{p.Type, "null"}
		}
		if p.Enum != nil {
			prop["enum"] = slices.Clone(p.Enum)
		}
		if p.extra != nil {
			maps.Copy(prop, p.extra())
		}
		props[p.Name] = prop
		if p.Required {
			required = append(required, p.Name)
		}
	}
	schema := map[string]any{
		"type":                 "object",
		"properties":           props,
		"additionalProperties": false,
	}
	if required != nil {
		schema["required"] = required
	}
	return schema
}

// MCPTool returns the tool as an MCP tools/list entry: name, description and
// inputSchema.
func (s Spec) MCPTool() map[string]any {
	return map[string]any{"name": s.Name, "description": s.Description, "inputSchema": s.JSONSchema()}
}

// Common parameters.
func agentNameParam(what string) Param {
	return Param{Name: "agent_name", Type: TypeString, Required: true, Description: what}
}

func positive() map[string]any { return map[string]any{"exclusiveMinimum": 0} }

func namePattern() map[string]any {
	return map[string]any{"pattern": `^[A-Za-z][A-Za-z0-9_.-]{0,63}$`}
}

func transitionPattern() map[string]any {
	return map[string]any{
		"pattern": `^\s*(idle|busy|waiting|terminated|\*)\s*->\s*(idle|busy|waiting|terminated|\*)\s*$`,
	}
}

func stringValues() map[string]any {
	return map[string]any{"additionalProperties": map[string]any{"type": "string"}}
}

// catalog is the read-only tool table; it is never modified (callers get
// clones).
var catalog = []Spec{
	{
		Name: ToolSendMessage,
		Description: "Send a message to an agent one hop away: your parent, one of your children or a sibling, by name. " +
			`Root agents may send to "USER" (the operator). The recipient is woken to read it; ` +
			"there is no waiting for a reply: a reply arrives later as a new message.",
		Params: []Param{
			{Name: "recipient", Type: TypeString, Required: true, Description: `Name of the recipient (parent, child or sibling), or "USER".`},
			{Name: "text", Type: TypeString, Required: true, Description: "The message text."},
		},
	},
	{
		Name:        ToolBroadcast,
		Description: "Send the same message to all your siblings (agents with the same parent). Root agents have no siblings.",
		Params: []Param{
			{Name: "text", Type: TypeString, Required: true, Description: "The message text."},
		},
	},
	{
		Name: ToolCheckInbox,
		Description: "Read and remove pending messages from your inbox, optionally only those from one sender and/or of one kind. " +
			"Messages are also shown to you automatically when you are woken, so you rarely need this.",
		Params: []Param{
			{Name: "sender", Type: TypeString, Description: `Only messages from this agent name ("USER" and "SYSTEM" also work).`},
			{Name: "kind", Type: TypeString, Description: "Only messages of this kind.",
				Enum: []string{"request", "response", "notification", "error"}},
		},
	},
	{
		Name: ToolSpawnAgent,
		Description: "Create a child agent with its own instructions. It starts after your current turn ends and runs one turn " +
			"on its task; it reports back with complete or send_message. Names are unique among your children.",
		Params: []Param{
			{Name: "name", Type: TypeString, Required: true, extra: namePattern,
				Description: "Child name: 1-64 characters, starting with a letter; letters, digits, '_', '.', '-'. Not USER or SYSTEM, not your own name."},
			{Name: "instructions", Type: TypeString, Required: true, Description: "The child's system prompt: its task and how to report."},
			{Name: "metadata", Type: TypeObject, extra: stringValues,
				Description: "Optional string key/value labels for the child."},
			{Name: "provider", Type: TypeString, Description: "Provider for the child (default: yours)."},
			{Name: "model", Type: TypeString, Description: "Model for the child (default: yours)."},
			{Name: "workspace", Type: TypeString, Enum: []string{"none"},
				Description: `"none": no workspace of its own. Left out, a child of an agent with a workspace gets one, branched from yours as this turn ends.`},
			{Name: "budget", Type: TypeObject,
				Description: `An envelope for the child and its subtree, reserved from your own remaining budget: {"tokens": N, "usd": X, "turns": N}, any of them. A grant larger than what you have left is refused.`},
		},
	},
	{
		Name:        ToolInspectAgent,
		Description: "Show a direct child's state, gate, metadata and pending messages.",
		Params: []Param{
			{Name: "name", Type: TypeString, Required: true, Description: "Name of one of your direct children."},
		},
	},
	{
		Name: ToolComplete,
		Description: "Finish your task: send the result to your parent and terminate after this turn. " +
			"Root agents cannot complete; terminate your children first.",
		Params: []Param{
			{Name: "result", Type: TypeString, Required: true, Description: "The result to report to your parent."},
		},
	},
	{
		Name:        ToolPoke,
		Description: "Wake a direct child so it retries its pending messages (for example after a failed turn). Does nothing if it is busy or has no messages.",
		Params:      []Param{agentNameParam("Name of one of your direct children.")},
	},
	{
		Name: ToolRemindMe,
		Description: "Schedule a reminder: after timeout seconds you receive a SYSTEM notification \"Reminder: <reason>\". " +
			"With every, it repeats at that interval until cancelled.",
		Params: []Param{
			{Name: "reason", Type: TypeString, Required: true, Description: "What the reminder is about; it is in the notification."},
			{Name: "timeout", Type: TypeNumber, Required: true, extra: positive, Description: "Seconds until the first reminder (> 0)."},
			{Name: "every", Type: TypeNumber, extra: positive, Description: "Repeat interval in seconds (> 0); omit for a one-shot reminder."},
		},
	},
	{
		Name:        ToolCancelReminder,
		Description: "Cancel one of your reminders.",
		Params: []Param{
			{Name: "reminder_id", Type: TypeString, Required: true, Description: "The reminder_id that remind_me returned."},
		},
	},
	{
		Name:        ToolListChildren,
		Description: "List your direct children with their state, gate, metadata and number of pending messages.",
	},
	{
		Name:        ToolSetAgentMetadata,
		Description: "Set or delete one metadata key of a direct child.",
		Params: []Param{
			agentNameParam("Name of one of your direct children."),
			{Name: "key", Type: TypeString, Required: true, Description: "Metadata key."},
			{Name: "value", Type: TypeString, Nullable: true, Description: "New value; null or omitted deletes the key."},
		},
	},
	{
		Name: ToolSubscribe,
		Description: "Get a SYSTEM notification when an agent one hop away changes state. " +
			`transition is "from->to" with states idle, busy, waiting, terminated or * (any), e.g. "busy->idle" or "*->terminated".`,
		Params: []Param{
			agentNameParam("Name of an agent one hop away (parent, child or sibling)."),
			{Name: "transition", Type: TypeString, Required: true, extra: transitionPattern,
				Description: `"from->to", each one of idle, busy, waiting, terminated, *.`},
			{Name: "once", Type: TypeBoolean, Description: "Remove the subscription after its first notification (default false)."},
		},
	},
	{
		Name:        ToolUnsubscribe,
		Description: "Remove one of your subscriptions.",
		Params: []Param{
			{Name: "subscription_id", Type: TypeString, Required: true, Description: "The subscription_id that subscribe returned."},
		},
	},
	{
		Name:        ToolGate,
		Description: "Gate a direct child: its messages keep queueing but it takes no turn until you ungate it or permit a turn.",
		Params:      []Param{agentNameParam("Name of one of your direct children.")},
	},
	{
		Name:        ToolUngate,
		Description: "Remove the gate from a direct child; it is woken if it has pending messages.",
		Params:      []Param{agentNameParam("Name of one of your direct children.")},
	},
	{
		Name:        ToolPermitTurn,
		Description: "Let a gated, idle direct child take exactly one turn; the gate stays up afterwards.",
		Params:      []Param{agentNameParam("Name of one of your direct children.")},
	},
	{
		Name: ToolAwaitInput,
		Description: "Pause this run until the operator responds (an approval, an answer, a file). " +
			"The response is this tool's result. If nobody responds within timeout seconds, the run is interrupted.",
		Params: []Param{
			{Name: "kind", Type: TypeString, Required: true, extra: namePattern,
				Description: "What you are waiting for, a short label such as approval, input or tool_result."},
			{Name: "prompt", Type: TypeString, Required: true, Description: "The question or request shown to the operator."},
			{Name: "timeout", Type: TypeNumber, Required: true, extra: positive, Description: "Seconds to wait (> 0)."},
		},
	},
	{
		Name: ToolMergeChild,
		Description: "Merge a child's work into your workspace: its uncommitted changes are committed to its branch, then the branch " +
			"is merged into yours (a merge commit). On conflicts the merge is aborted, your files stay as they were, and the result names the paths.",
		Params: []Param{agentNameParam("Name of one of your direct children (it may have completed already).")},
	},
}
