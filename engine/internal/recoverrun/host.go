package recoverrun

import (
	"time"

	"github.com/warren-dev/warren/engine/internal/placement"
	"github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/token"
)

// Host is what a run needs of the engine: the steps that touch the
// engine's agents, locks, timers and services. Each method does one thing
// the engine did at that point of its recovery; the run calls them in the
// order of its steps. A is the engine's agent (an *Agent's Agent): what
// a step asks of that agent alone it asks of A itself (Record).
//
// The methods are grouped by the step that calls them; none is called
// with a lock of the run's (it has none).
type Host[A Record] interface {
	Starter
	Claimer
	Loader[A]
	Placer[A]
	Restorer[A]
	Settler[A]
	Scrubber[A]
}

// Record is what a run asks of the engine's agent itself (the engine's
// record, package agentrec, has these methods).
type Record interface {
	// NeedsRestartMark: the agent's open run was running in a start other
	// than boot's and must be marked interrupted.
	NeedsRestartMark(boot string) bool
	// MarkCorrupt lists the agent corrupt with err, unless it already is.
	MarkCorrupt(err error)
}

// Starter starts a recovery at boot.
type Starter interface {
	// Prepare makes the agents' directory durable, kills the processes of
	// the previous run and wires the live resume secrets to the bus.
	Prepare() error
	// SetRecovering holds wakes back (true) or lets them go (false).
	SetRecovering(on bool)
	// OpenUserInbox opens the operator's inbox.
	OpenUserInbox() error
	// AgentIDs lists the agents to recover (directories and the store's).
	AgentIDs() ([]string, error)
}

// Claimer is the cluster store's side: leases and the takeover scan.
type Claimer interface {
	// StoreAgents lists the store's agents (a takeover scan).
	StoreAgents() ([]string, error)
	// Known: the engine runs id, knows it terminated, or holds a claim on
	// it.
	Known(id string) bool
	// Stopping: the engine's Close has begun.
	Stopping() bool
	// Claimable returns the ids to load (claimed) and those another
	// daemon holds (elsewhere); on the local store, all ids and none.
	Claimable(ids []string) (take, elsewhere []string)
	// DropLease gives up the claim on id, if held.
	DropLease(id string)
	// Scan runs one takeover scan (the engine's Takeover).
	Scan() error
	// ArmTakeover arms the next takeover scan to run f at at.
	ArmTakeover(at time.Time, f func())
}

// Loader reads agents back and lists those recovery cannot place.
type Loader[A Record] interface {
	// Load opens and folds the logs of ids and makes each opened one the
	// engine's agent, wired to its log's appends (retry: the logs that
	// cannot be opened for lack of a resource are retried first).
	Load(ids []string, retry bool) []*Agent[A]
	// ListCorrupt makes an agent of l without a log, listed with cause,
	// and sets l.Agent to it.
	ListCorrupt(l *Agent[A], cause error)
	// Forget remembers l as terminated (its name and parent).
	Forget(l *Agent[A])
	// RemoveOrphanDir removes the directory of an agent never created.
	RemoveOrphanDir(id string)
	// SetQuarantine records the directories <home>/quarantine holds, by
	// id.
	SetQuarantine(q map[string]string)
}

// Placer places the live agents in the tree.
type Placer[A Record] interface {
	// Parents describes the candidates' parents as the engine knows them
	// now (placement.Order).
	Parents(cands []placement.Candidate) map[string]placement.Parent
	// QuarantinedAs is where the directory of id was quarantined, or "".
	QuarantinedAs(id string) string
	// ParentCause is why a listed parent's log could not be opened.
	ParentCause(id string) error
	// AddToTree adds l to the tree under its parent.
	AddToTree(l *Agent[A]) error
	// List lists l's agent, corrupt with cause unless cause is nil.
	List(l *Agent[A], cause error)
}

// Restorer restores what a placed agent had besides its log.
type Restorer[A Record] interface {
	// Snapshot gives l's agent its session.json, read (and rebuilt when
	// it is not usable) when it is first needed or by the scrub's
	// LoadSnapshot, whichever comes first.
	Snapshot(l *Agent[A])
	// AddToken reinstalls a resume token.
	AddToken(tok token.Token) error
}

// Settler adopts the placed agents into the running engine.
type Settler[A Record] interface {
	// IndexSubscription indexes sub of subscriber (a recovery).
	IndexSubscription(sub projection.Subscription, subscriber string)
	// Redeliver delivers the messages l's log records as sent that their
	// recipients lack.
	Redeliver(l *Agent[A])
	// OwedNotices delivers the notices l's latest transition owes (its
	// log's latest notices.owed) that their subscribers lack: those a
	// crash between the transition's write and the notices' kept back.
	OwedNotices(l *Agent[A])
	// SettleWaits expires the waits whose deadline passed and makes sure
	// every pending wait has its notice.
	SettleWaits()
	// AdoptTaken indexes the subscriptions to and from the agents a
	// takeover placed, delivers what they sent that was not received, and
	// arms and announces their waits.
	AdoptTaken(placed []*Agent[A])
	// Arm counts l's pending messages toward the engine's totals, arms
	// its reminders, and returns how many messages are pending.
	Arm(l *Agent[A]) int
	// FinishCutSpawns creates the children whose creation a crash cut
	// off in l's ended runs (placement.Existing.CutSpawns).
	FinishCutSpawns(l *Agent[A], existing placement.Existing)
	// Prune drops from l's projection what only this recovery needed.
	Prune(l *Agent[A], existing placement.Existing)
	// BootstrapUnstarted starts the bootstrap turn of a child that never
	// had one.
	BootstrapUnstarted(l *Agent[A])
	// Wake wakes l's agent; WakeAll every agent with pending messages.
	Wake(l *Agent[A])
	WakeAll()
	// Changed tells waiters that live state changed.
	Changed()
}

// Scrubber reads the session.json files a recovery left to read, writes
// checkpoints and checks the lines it skipped.
type Scrubber[A Record] interface {
	// Background runs f as background work the engine's Close waits for;
	// false when it is closing and f will not run.
	Background(f func()) bool
	// LoadSnapshot reads l's session.json now if nothing has read it yet.
	LoadSnapshot(l *Agent[A])
	// CheckpointAll writes a checkpoint of every log recovery folded
	// lines of.
	CheckpointAll()
	// Scrubbed tells the engine the scrub is over (idempotent).
	Scrubbed()
	// RemoveCheckpoint removes id's checkpoint.
	RemoveCheckpoint(id string)
}
