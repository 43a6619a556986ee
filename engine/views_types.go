package engine

import (
	fold "github.com/warren-dev/warren/projection"
	"time"

	"github.com/warren-dev/warren/provider"
)

// The views are what the engine's API shows of its agents: the
// list and inspect views (agent.list, agent.inspect), the derived status
// of SPEC 4, the pending waits (waits.list and the USER inbox's wait
// notices), a run's wait as a turn's result shows it, and the terminated
// agents agent.list (all) adds.
//
// It works on snapshots: Take copies what the views read of one agent
// (its projection and the engine's flags beside it) into a agentSnapshot, a
// plain value that stays valid once the agent's lock is released. Every
// other function here is pure: no locks, no I/O, no clock (the caller
// passes the time and the boot id). The engine looks an agent up, takes
// its lock, takes the snapshot, releases the lock and calls in; the daemon
// builds the wire shapes from the typed views (daemon/rpc_views.go).
//
// # Locks
//
// None. Take and TakeSettings read a projection.State, which the caller
// guards (the engine holds the record's lock across the call); the
// agentSnapshot they return shares nothing with it that is changed later.

// AgentView is one agent as agent.list and agent.inspect show it.
type AgentView struct {
	ID        string
	Name      string
	Path      string
	ParentID  string
	Status    string
	Provider  string
	Model     string
	Pending   int
	Wait      *WaitInfo
	LastError string
	Error     string
	// Degraded says why the agent's log refuses appends, or which run end
	// it has not logged yet ("" when neither).
	Degraded string
	Usage    provider.Usage
	// Spent is what the agent's own requests and turns cost (SPEC 13; the
	// zero value for a terminated agent).
	Spent fold.Spent
	// CreatedAt is when the agent was created; LastTurnAt when its latest
	// turn started (zero: none yet).
	CreatedAt, LastTurnAt time.Time
}

// AgentDetail is one agent as agent.inspect shows it: its list view,
// children, settings and one page of its inbox.
type AgentDetail struct {
	AgentView
	Children     []ChildView
	Cwd          string
	Inbox        []InboxItem
	HasMore      bool   // more pending messages follow the page
	InboxNextSeq uint64 // the since_seq of the next page (when HasMore)
	Metadata     map[string]string
	Gated        bool
	Instructions string
	// LastSeq is the seq of the agent's last entry, when its log is open
	// (HasLog): agent.log since_seq from here reads what happens next.
	HasLog  bool
	LastSeq uint64
}

// ChildView is a child as agent.inspect lists it.
type ChildView struct{ ID, Name, Status string }

// InboxItem is one pending message as agent.inspect shows it.
type InboxItem struct {
	From, Text, MessageID, Kind string
	Timestamp                   time.Time
	Seq                         uint64
}

// WaitInfo is a run's wait as a turn result and the agent views show it:
// never the secret. State is the resume token's state (live, consumed,
// revoked, expired).
type WaitInfo struct {
	RunID, Kind, Prompt, TokenID string
	Deadline                     time.Time
	State                        string
}

// WaitView is one pending wait, as waits.list shows it (SPEC 4, 8.1):
// never the secret.
type WaitView struct {
	AgentID  string
	Path     string
	RunID    string
	Kind     string
	Prompt   string
	TokenID  string
	Deadline time.Time
	Since    time.Time
}

// TerminatedView is a terminated agent as agent.list shows it. Known says
// its log was read (provider, model, usage and times are set).
type TerminatedView struct {
	ID, Name, Path, ParentID string
	Known                    bool
	Provider, Model          string
	Usage                    provider.Usage
	CreatedAt, LastTurnAt    time.Time
	TerminatedAt             time.Time
}
