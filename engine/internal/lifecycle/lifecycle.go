// Package lifecycle holds the order of an agent's life in the engine: its
// creation, its spawn as a child, the reset of its context and its
// termination. It decides and orders the steps and writes the texts; the
// engine carries each step out (the Host and Agent interfaces, which
// engine/lifecycle.go implements), so the sequences are tested here with a
// fake that records the calls.
//
//   - Create checks the spec (provider, model, name, texts, a live
//     parent), reserves the name in the tree, opens the provider session
//     (its handle goes into session.created), opens the log and writes
//     agent.created and session.created in one write, binds the agent to
//     the log, gives it its session.json snapshot, adopts it and saves
//     session.json in the background. Any failure before the adoption
//     undoes what came before it: the provider session is abandoned, the
//     reservation removed, a directory the failed write left removed.
//     A repeated create (the id is in the tree) returns the id and does
//     nothing.
//   - Terminate ends a leaf that runs no turn: a live wait's token is
//     revoked, an owed run end written, agent.terminated logged, then the
//     agent is retired (session.json, its timers, its provider session),
//     unlisted in one step under the engine's lock (subscriptions to it
//     taken, remembered as gone, out of the tree and the map), and its
//     subscribers are told. TerminateTree does a subtree, deepest first,
//     refusing everything when one of its agents is mid-turn.
//   - Defer, Spawn and Respawn create the children a parent spawns:
//     queued until the parent's turn ends (Spawns, one per parent), then
//     created and started on their bootstrap turn; a failure tells the
//     parent. Complete terminates an agent after its turn, or now. Redo
//     does either again for a call a re-run turn answers from the log.
//   - Reset logs context.reset on an idle agent and stops its provider
//     session.
//
// Refusals (the agent's state or the request forbids it) are the
// engine's domain errors (package domainerr) with the user's text;
// errors of the host's own steps are returned as they are or wrapped with
// what was being done.
//
// # Locks
//
// The package holds no locks and no state except Spawns, which its caller
// guards (the engine: the parent's a.mu, taken by Agent.Defer and
// Agent.Spawned). Each Host and Agent method takes the engine's locks it
// needs itself and returns with none held.
package lifecycle

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/engine/internal/gone"
	"github.com/warren-dev/warren/engine/internal/subs"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/session"
)

// Lifecycle acts on the agents of one engine. It is a value: the engine
// builds one per operation.
type Lifecycle struct {
	Host Host
	Tree Tree
	// Now is the engine's clock, read where a time is written.
	Now func() time.Time
	Log hclog.Logger
	// Ctx bounds the creation of spawned children (the engine's life).
	Ctx context.Context
	// DefaultProvider and DefaultModel fill a spec that names no
	// provider; without a DefaultProvider such a spec is refused.
	DefaultProvider, DefaultModel string
	// NoWake: spawned children get no bootstrap turn.
	NoWake bool
}

// Spec describes a new agent.
type Spec struct {
	ID           string // "" = a fresh random id
	Name         string
	ParentID     string // "" = a root
	Instructions string
	Provider     string
	Model        string
	Metadata     map[string]string
	// Cwd is the agent's working directory (absolute; the RPC edge checks
	// it exists); "" means the daemon's.
	Cwd string
}

// Terminated is one agent a terminate terminated: its id and the path it
// had.
type Terminated struct{ ID, Path string }

// Tree is the engine's agent tree (package tree's *Tree), read only.
type Tree interface {
	Children(id string) []string
	Parent(id string) (string, bool)
	Path(id string) string
}

// Host is the engine as an agent's life acts on it. Each method is one
// step and takes the engine's locks itself.
type Host interface {
	// Lookup finds a live agent, or returns the engine's not-found error
	// for id.
	Lookup(id string) (Agent, error)

	// Provider looks a provider up (an unknown one is refused).
	Provider(name string) (provider.Provider, error)
	// CheckModel resolves and checks a provider's model (an alias is
	// replaced in place); Served checks that prov serves it.
	CheckModel(provName string, model *string) error
	Served(prov provider.Provider, provName, model string) error
	// CheckText checks instructions and metadata against the limits.
	CheckText(instructions string, md map[string]string) error
	// NewID is a fresh agent id.
	NewID() string
	// Reserve adds id to the tree under its parent with its name, unless
	// the engine is closed; err is the tree's refusal. Unreserve removes
	// it again.
	Reserve(id, name, parentID string) (closed bool, err error)
	Unreserve(id string)
	// OpenSession creates the provider session of the new agent id; its
	// error is the engine's (what was being done is in it).
	OpenSession(ctx context.Context, prov provider.Provider, id string, spec Spec) (Session, error)
	// OpenLog opens (creating) the new agent's log.
	OpenLog(id string) (NewLog, error)
	// DropLease gives up the engine's claim on id's log; RemoveOrphanDir
	// removes the directory of an agent whose agent.created is not
	// durable.
	DropLease(id string)
	RemoveOrphanDir(id string)

	// Notify tells the subscribers in watchers that the agent named name
	// went from state from to state to (key identifies the transition).
	Notify(name string, watchers []subs.Sub, from, to, key string)
	// Changed signals a change outside the logs (the engine's waiters).
	Changed()

	// Tell gives agent to a system message of kind error with text.
	Tell(to, text string) error
	// ReadSeq reads entry seq back from id's log (off is a hint).
	ReadSeq(ctx context.Context, id string, seq uint64, off int64) (eventlog.Entry, error)
}

// Session is a new agent's provider session, leased until the agent is
// adopted.
type Session interface {
	Handle() string
	// Abandon drops the session (the creation failed); Keep releases the
	// lease with the session live.
	Abandon()
	Keep()
}

// NewLog is a new agent's log, before the agent exists.
type NewLog interface {
	LastSeq() uint64
	// Bind makes the agent whose projection the log's appends fold into
	// from now on.
	Bind() Agent
	AppendBatch(recs []eventlog.Record) error
	Close() error
	// Adopt makes the bound agent one of the engine's agents.
	Adopt()
}

// Look is what the operations read of an agent, in one look under its
// lock.
type Look struct {
	Busy       bool // a turn runs or is being started
	Terminated bool
	Corrupt    bool // its log is damaged in the middle
	// OpenRun: its latest run has not ended (waiting or interrupted).
	OpenRun bool
	// WaitToken and RunID name the live wait of the open run ("" when
	// none).
	WaitToken, RunID string
}

// Inherited is what a spawned child takes from its parent.
type Inherited struct{ Provider, Model, Cwd string }

// Agent is one agent as its life acts on it: the engine's record of it.
// Each method is one step and takes the agent's locks itself.
type Agent interface {
	ID() string
	Name() string
	Look() Look
	Inherit() Inherited
	// State is its state as tools and subscriptions see it.
	State() string
	// Append writes to its log, durable on return; AppendBatch several
	// entries in one write.
	Append(event string, data any) (eventlog.Entry, error)
	AppendBatch(recs []eventlog.Record) ([]eventlog.Entry, error)
	// Notices is what its transition from -> to (named key, subs.Key)
	// owes its subscribers, logged in the transition's write (subs.Owed).
	Notices(from, to, key string) []eventlog.Record
	// SetSnapshot sets the session.json snapshot of a new agent; Save
	// changes the snapshot with f and writes it in the background.
	SetSnapshot(s *session.Session)
	Save(f func(*session.Session))
	// Claim marks it busy (or says why it cannot run now); Release
	// undoes a claim that started no turn.
	Claim() error
	Release()

	// Revoke revokes the live wait's token (token.revoked with reason).
	Revoke(tokenID, runID, reason string) error
	// FlushOwed writes the end of its run if it is owed.
	FlushOwed() error
	// GoneInfo is what the list of terminated agents shows of it.
	GoneInfo(ended time.Time) *gone.Info
	// StopTimers cancels its timers; StopSession stops its live provider
	// session.
	StopTimers()
	StopSession()
	// Unlist, under the engine's lock, marks it terminating, takes the
	// subscriptions to it (returned), remembers it as gone (name, parent,
	// info) and removes it from the tree and the engine's agents.
	Unlist(name, parentID string, info *gone.Info) []subs.Sub
	// Detach stops counting its pending messages in the engine's totals.
	Detach()
	CloseLog() error

	// Defer queues spec until its turn ends, running later then (see
	// Spawns.Defer); Spawned takes spec id off the queue.
	Defer(spec Spec, later func()) (ok, now bool)
	Spawned(id string)
	// Bootstrap starts its first turn as a spawned child (unless gated).
	Bootstrap()
	// Completing marks it to be terminated after its turn and reports
	// whether it runs one.
	Completing() (inTurn bool)
}
