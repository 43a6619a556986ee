package toolexec

import (
	"errors"
	"time"

	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/tools"
)

// Errors an Env returns for conditions the tools turn into tool-level
// results ({"error": ...}) rather than failures of the call.
var (
	// ErrInboxFull: a recipient's inbox, or the daemon's pending
	// messages, is at a limit.
	ErrInboxFull = errors.New("inbox full")
	// ErrNoAgent: a recipient does not exist, is terminated or has a
	// damaged log.
	ErrNoAgent = errors.New("agent not found")
)

// Env is what the tools need from the core. The daemon's Core implements
// it (engine/toolenv.go); tests implement it with a fake. Methods are safe
// for concurrent use; none is called with a lock of the package held.
type Env interface {
	Tree
	Clock
	Agents
	Mail
	Children
	Schedule
}

// Tree is the agent tree as tools read it (SPEC 6 names and routing);
// *tree.Tree implements it.
type Tree interface {
	// Lookup resolves a name one hop from fromID ("USER" -> USER).
	Lookup(fromID, name string) (string, error)
	// ChildByName resolves a direct child of parentID.
	ChildByName(parentID, name string) (string, error)
	// Children lists the direct children of id in creation order.
	Children(id string) []string
	// CheckRoute reports whether from may message to.
	CheckRoute(from, to string) error
	// BroadcastTargets lists from's siblings, or errors when it has none.
	BroadcastTargets(from string) ([]string, error)
}

// Clock gives time, ids and the limits in force.
type Clock interface {
	Now() time.Time
	// NewID is a fresh random id (a call outside a run, a tool.call
	// entry's call_id).
	NewID() string
	Limits() Limits
}

// Limits bound what one call takes or shows.
type Limits struct {
	// MessageBytes is the longest string argument (limits.message_bytes).
	MessageBytes int
	// TakeCount and TakeBytes bound the messages one check_inbox result
	// carries (the first message is taken whatever its size).
	TakeCount int
	TakeBytes int64
	// RecentCount and RecentBytes bound inspect_agent's recent_messages.
	RecentCount int
	RecentBytes int64
}

// Agent is a snapshot of one agent, taken under its lock.
type Agent struct {
	ID       string
	Name     string
	ParentID string
	// State is schema.StateIdle, StateBusy, StateWaiting or StateTerminated.
	State string
	Gated bool
	// Busy: a turn is running or being started.
	Busy     bool
	Metadata map[string]string // a copy
	Pending  int               // pending messages
}

// Agents reads agents.
type Agents interface {
	// Agent returns a snapshot of a live agent.
	Agent(id string) (Agent, bool)
	// DisplayName is how a sender appears in results: USER, SYSTEM, the
	// agent's name, else its id.
	DisplayName(id string) string
	// Inbox returns a copy of id's pending messages, oldest first, and
	// the ids of those its open run was shown (the running turn's, or an
	// interrupted or waiting run's, which its re-run consumes).
	Inbox(id string) (pending []inbox.Message, shown []string)
	// PendingFirst returns up to n of id's first pending messages, within
	// b bytes (the first always), payloads possibly not resident.
	PendingFirst(id string, n int, b int64) []inbox.Message
	// FillPayloads returns msgs with every payload read back from the
	// owner's log.
	FillPayloads(owner string, msgs []inbox.Message) ([]inbox.Message, error)
}

// Unreserver is implemented by an Env whose CheckEnqueue reserves the
// room of the message it lets through until Enqueue: Unreserve gives back
// the room of checked messages that will not be enqueued (a refused
// broadcast, a failed step). Unreserving a message already enqueued does
// nothing.
type Unreserver interface {
	Unreserve(msgs []inbox.Message)
}

// unreserve gives back the room of msgs when env reserves it.
func unreserve(env Env, msgs []inbox.Message) {
	if u, ok := env.(Unreserver); ok && len(msgs) > 0 {
		u.Unreserve(msgs)
	}
}

// Mail checks and makes messages durable.
type Mail interface {
	// CheckEnqueue decides whether m can be enqueued after n messages of b
	// payload bytes to the same recipient not yet in its inbox: skip when
	// the recipient already has it; an error wrapping ErrInboxFull or
	// ErrNoAgent when it cannot take it.
	CheckEnqueue(m inbox.Message, n int, b int64) (skip bool, err error)
	// Enqueue logs m in its recipient's log (message.enqueued) and wakes
	// the recipient. It does not check limits (CheckEnqueue did).
	Enqueue(m inbox.Message) error
	// MarkDelivered logs message.delivered for msgIDs in id's log, in one
	// write.
	MarkDelivered(id string, msgIDs []string) error
}

// ChildSpec is a child to create; it has the fields of engine.CreateSpec.
type ChildSpec struct {
	ID           string
	Name         string
	ParentID     string
	Instructions string
	Provider     string
	Model        string
	Metadata     map[string]string
	// Cwd is the child's working directory ("" means the daemon's); a
	// child inherits its parent's.
	Cwd string
}

// Children are the changes a parent makes to its children. Each logs its
// entry in the right agent's log before it changes live state.
type Children interface {
	// CheckProvider reports an unknown provider name.
	CheckProvider(name string) error
	// ChildSpec is the spec of a child of parent spawned by v with id:
	// it inherits the parent's provider and model unless v names them.
	ChildSpec(parent, id string, v tools.SpawnAgent) ChildSpec
	// CheckChild checks a child spec against the limits, fills its
	// default model and checks the provider serves it.
	CheckChild(spec *ChildSpec) error
	// CreateChild creates a child now and starts its bootstrap turn
	// (a spawn outside any turn).
	CreateChild(spec ChildSpec) error
	// DeferSpawn creates the child after the parent's turn ends; false
	// when a child of that name, with another id, is already pending.
	DeferSpawn(parent string, spec ChildSpec) bool
	// MarkCompleting terminates id after its turn, or now if it runs none.
	MarkCompleting(id string)
	// Poke wakes id even after a failed turn.
	Poke(id string)
	// CheckMetadata checks metadata against the limits.
	CheckMetadata(md map[string]string) error
	// SetMetadata logs metadata.updated in id's log (value nil deletes).
	SetMetadata(id, key string, value *string) error
	// SetGate logs tool.gate in id's log (name as called), withdraws a
	// permit, and wakes id when it is ungated.
	SetGate(id, name string, gated bool) error
	// PermitTurn logs tool.permit_turn in id's log and lets it take one
	// turn.
	PermitTurn(id, name string) error
}

// Schedule is what waits on time or on other agents: reminders,
// subscriptions and await_input. Each logs its entry in the caller's log
// before it changes live state.
type Schedule interface {
	// ScheduleReminder logs reminder.scheduled in id's log and arms it.
	ScheduleReminder(id string, r Reminder) error
	// CancelReminder logs reminder.cancelled and disarms it, serialised
	// with its firing; known is false for an unknown or fired reminder.
	CancelReminder(id, reminderID string) (known bool, err error)
	// Subscribe indexes s and logs tool.subscribe in the subscriber's
	// log; alive is false when the target is terminated.
	Subscribe(subscriber string, s Subscription) (alive bool, err error)
	// Unsubscribe logs tool.unsubscribe (reason "unsubscribed") and
	// removes the subscription; known is false when subscriber has no
	// subscription of that id.
	Unsubscribe(subscriber, subscriptionID string) (known bool, err error)
	// AwaitInput suspends the run at pos: it returns
	// provider.ErrRunSuspended once the wait is durable.
	AwaitInput(id string, v tools.AwaitInput, pos Pos) error
}

// Reminder is a reminder to schedule.
type Reminder struct {
	ID     string
	Reason string
	Due    time.Time // UTC
	Every  time.Duration
}

// Subscription is a subscription to add.
type Subscription struct {
	ID       string
	Target   string
	From, To string
	Once     bool
}
