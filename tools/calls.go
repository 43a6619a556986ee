package tools

import (
	"github.com/warren-dev/warren/schema"
	"time"

	"github.com/warren-dev/warren/inbox"
)

// Call is implemented by every typed value Parse returns.
type Call interface {
	// Tool returns the tool name.
	Tool() string
}

// SendMessage is a parsed send_message call.
type SendMessage struct {
	Recipient string // a name one hop away, or "USER"
	Text      string
}

// Broadcast is a parsed broadcast call.
type Broadcast struct {
	Text string
}

// CheckInbox is a parsed check_inbox call. Empty fields do not filter.
type CheckInbox struct {
	Sender string     // a name, "USER" or "SYSTEM"; "" = any
	Kind   inbox.Kind // "" = any
}

// SpawnAgent is a parsed spawn_agent call. Name is a valid agent name.
// Empty Provider/Model mean "inherit the parent's".
type SpawnAgent struct {
	Name         string
	Instructions string
	Metadata     map[string]string // nil when not given
	Provider     string
	Model        string
	// Workspace is "none" for a child without a workspace of its own
	// ("" = one branched from the parent's, when the parent has one).
	Workspace string
	// Budget is the envelope the parent grants (nil: none; By is set by
	// the engine to the parent).
	Budget *schema.BudgetSetData
}

// InspectAgent is a parsed inspect_agent call.
type InspectAgent struct {
	Name string // a direct child's name
}

// Complete is a parsed complete call.
type Complete struct {
	Result string
}

// Poke is a parsed poke call.
type Poke struct {
	AgentName string
}

// RemindMe is a parsed remind_me call. Every is 0 for a one-shot reminder.
type RemindMe struct {
	Reason  string
	Timeout time.Duration
	Every   time.Duration
}

// CancelReminder is a parsed cancel_reminder call.
type CancelReminder struct {
	ReminderID string
}

// ListChildren is a parsed list_children call.
type ListChildren struct{}

// SetAgentMetadata is a parsed set_agent_metadata call. Value nil deletes
// the key.
type SetAgentMetadata struct {
	AgentName string
	Key       string
	Value     *string
}

// Subscribe is a parsed subscribe call. From and To are one of the State*
// constants (StateAny = "*").
type Subscribe struct {
	AgentName string
	From, To  string
	Once      bool
}

// Matches reports whether the subscription fires for a from->to transition.
func (s Subscribe) Matches(from, to string) bool {
	return (s.From == StateAny || s.From == from) && (s.To == StateAny || s.To == to)
}

// Unsubscribe is a parsed unsubscribe call.
type Unsubscribe struct {
	SubscriptionID string
}

// Gate is a parsed gate call.
type Gate struct {
	AgentName string
}

// Ungate is a parsed ungate call.
type Ungate struct {
	AgentName string
}

// PermitTurn is a parsed permit_turn call.
type PermitTurn struct {
	AgentName string
}

// AwaitInput is a parsed await_input call.
type AwaitInput struct {
	Kind    string
	Prompt  string
	Timeout time.Duration
}

// Tool implements Call.
func (SendMessage) Tool() string { return ToolSendMessage }

// Tool implements Call.
func (Broadcast) Tool() string { return ToolBroadcast }

// Tool implements Call.
func (CheckInbox) Tool() string { return ToolCheckInbox }

// Tool implements Call.
func (SpawnAgent) Tool() string { return ToolSpawnAgent }

// Tool implements Call.
func (InspectAgent) Tool() string { return ToolInspectAgent }

// Tool implements Call.
func (Complete) Tool() string { return ToolComplete }

// Tool implements Call.
func (Poke) Tool() string { return ToolPoke }

// Tool implements Call.
func (RemindMe) Tool() string { return ToolRemindMe }

// Tool implements Call.
func (CancelReminder) Tool() string { return ToolCancelReminder }

// Tool implements Call.
func (ListChildren) Tool() string { return ToolListChildren }

// Tool implements Call.
func (SetAgentMetadata) Tool() string { return ToolSetAgentMetadata }

// Tool implements Call.
func (Subscribe) Tool() string { return ToolSubscribe }

// Tool implements Call.
func (Unsubscribe) Tool() string { return ToolUnsubscribe }

// Tool implements Call.
func (Gate) Tool() string { return ToolGate }

// Tool implements Call.
func (Ungate) Tool() string { return ToolUngate }

// Tool implements Call.
func (PermitTurn) Tool() string { return ToolPermitTurn }

// Tool implements Call.
func (AwaitInput) Tool() string { return ToolAwaitInput }

// MergeChild is a parsed merge_child call.
type MergeChild struct {
	AgentName string
}

// Tool implements Call.
func (MergeChild) Tool() string { return ToolMergeChild }
