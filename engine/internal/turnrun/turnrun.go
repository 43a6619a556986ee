// Package turnrun runs one turn of an agent (SPEC 7), from the claim's
// end to the next wake: the order of the turn's steps, the outcomes and
// what each one logs, returns and leaves behind.
//
// A turn, on its own goroutine (Runner.Run):
//
//  1. Begin: the turn becomes the agent's running one; its run and
//     provider are chosen (Choose: a new run, or the run a resume re-runs).
//     An agent this daemon may no longer run starts no turn.
//  2. The provider must be known; the end of an earlier run that could not
//     be logged is written first (the owed end); turn.start is logged;
//     session.json says running; subscribers see idle (or waiting) -> busy.
//  3. The attempts (package retry's policy) on the agent's provider
//     session: each one sends the prompt (with the history block a fresh
//     session must carry once), within the turn timeout, with the
//     attempt's tools open to calls made with the agent's credential; the
//     calls are in the log before the attempt ends. Before a retry,
//     turn.retry is logged and the client told. The session is discarded
//     after an attempt that leaves it unusable.
//  4. The end, by outcome:
//     complete: turn.complete (with the usage), the response, status idle;
//     suspended: nothing logged here (await_input logged the wait), status
//     suspended, the wait and the resume secret, once;
//     cancelled: turn.cancelled, status idle, a wrong-state error;
//     failed (a timeout given up on included): turn.failed with the error
//     and the attempts, status idle, the error.
//     An end that cannot be logged is owed (written when the log heals)
//     and the outcome is None, as it is for a turn that never started.
//  5. The aftermath (finish): session.json (idle, or suspended with its
//     wait), the agent at rest (a failed turn holds the agent from waking
//     on the same messages), a checkpoint asked for, busy -> idle (or
//     waiting), the work deferred during the turn, then completion
//     (terminate) or, after a failure, the parent's notice, and the next
//     wake; last the agent stops settling and the change signal fires.
//
// The engine carries out each step through Agent, one value per turn; the
// package holds no state and takes no lock (the Agent's methods take the
// agent's locks, never across a call back into this package).
package turnrun

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/engine/internal/retry"
	"github.com/warren-dev/warren/engine/internal/views"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/history"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/session"
)

// Request starts (or re-runs) a turn.
type Request struct {
	Prompt     string
	MessageIDs []string
	Provider   string
	Model      string
	// OnChunk receives response text as it is produced (a streaming
	// client). Once a chunk reached it, the turn is no longer retried.
	OnChunk func(string)
	// OnRetry, when set, is told of each retry once its turn.retry is
	// logged, before the backoff (a client shows the progress).
	OnRetry func(RetryNotice)
	// RunID and Turn re-run an earlier run (resume); empty for a new run.
	RunID string
	Turn  int
	// From is the subscription state the agent leaves ("idle" or
	// "waiting").
	From string
}

// Result is how a turn ended.
type Result struct {
	Response string
	RunID    string
	Status   session.Status // idle after success, failure or cancel; suspended when waiting
	Token    string         // the resume token, once, when the run suspended
	Wait     *views.WaitInfo
	Err      error
	// Set by Send: the wait its message revoked ({token_id, kind}) and the
	// run interrupted by a restart that it abandoned (a new run started).
	RevokedWait  *views.WaitInfo
	AbandonedRun string
}

// RetryNotice describes one scheduled retry of a turn (Request.OnRetry).
type RetryNotice struct {
	RunID      string
	Turn       int
	Attempt    int // the attempt that failed (1-based)
	MaxRetries int
	Error      string
	Delay      time.Duration
}

// Outcome is how a turn's attempts ended, as the aftermath acts on it.
type Outcome string

// The outcomes.
const (
	// None: no turn started, or its end could not be logged (it is owed):
	// nothing for session.json or the subscribers.
	None      Outcome = ""
	Complete  Outcome = "complete"
	Failed    Outcome = "failed"
	Cancelled Outcome = "cancelled"
	Suspended Outcome = "suspended"
)

// Settings are the agent's own provider and model and its last turn's
// number.
type Settings struct {
	Provider, Model string
	TurnNo          int
}

// Turn is the turn Begin started.
type Turn struct {
	RunID           string
	Turn            int
	Provider, Model string
	// Rerun: the turn re-runs an earlier run (a resume).
	Rerun bool
}

// Choose picks a turn's provider and model (the request's, else the
// agent's; the agent's model only with its own provider; else the
// provider's default) and its run (the request's, else a new one after
// the agent's last turn).
func Choose(req Request, s Settings, defaultModel func(provider string) string, newID func() string) Turn {
	provName, model := req.Provider, req.Model
	if provName == "" {
		provName = s.Provider
	}
	if model == "" && provName == s.Provider {
		model = s.Model
	}
	if model == "" {
		model = defaultModel(provName)
	}
	runID, turn := req.RunID, req.Turn
	if runID == "" {
		runID, turn = newID(), s.TurnNo+1
	}
	return Turn{RunID: runID, Turn: turn, Provider: provName, Model: model, Rerun: req.RunID != ""}
}

// Agent is the agent a turn runs on, as the engine carries out each step.
type Agent interface {
	Record
	Starter
	Caller
	Ender
	Aftermath
}

// Record is what every step writes to.
type Record interface {
	ID() string
	// Append logs one entry (durable when it returns nil), as store.Log's;
	// AppendBatch several in one write.
	Append(event string, data any) (eventlog.Entry, error)
	AppendBatch(recs []eventlog.Record) ([]eventlog.Entry, error)
	// SaveSession updates session.json through f (written in the
	// background).
	SaveSession(f func(*session.Session))
	// Notices is what the agent's transition from -> to (named key,
	// subs.Key) owes its subscribers, to be logged in the same write as
	// the transition (subs.Owed); Notify delivers what the latest logged
	// transition owes.
	Notices(from, to, key string) []eventlog.Record
	Notify()
}

// Starter is the start of a turn.
type Starter interface {
	// Begin makes the turn the agent's running one (cancel stops it),
	// chosen by Choose from the agent's settings, and returns why this
	// daemon may no longer run the agent (nil when it may), read in the
	// same critical section.
	Begin(req Request, cancel context.CancelFunc) (Turn, error)
	// Ended: the turn's work is over (whoever waits for the running turn
	// to stop may go on); called before the aftermath.
	Ended()
	// Provider fails when the provider is not known.
	Provider(name string) error
	// FlushOwed writes the end of an earlier run that could not be
	// logged, if any.
	FlushOwed() error
}

// Caller is what the attempts need.
type Caller interface {
	// Acquire gets the agent's provider session for the provider and
	// model, restoring or creating it.
	Acquire(ctx context.Context, provName, model string) (Session, error)
	// Policy is the retry policy in force (read once a session is held).
	Policy() retry.Policy
	// Delta publishes response text as it is produced.
	Delta(runID, text string)
	// Tools are a new attempt's tools.
	Tools(runID string, turn int) Tools
}

// Session is the agent's provider session, held for the turn.
type Session interface {
	// Inject is the history block the session's first prompt must carry
	// (nil when none); Injected says a prompt carrying it went through.
	Inject() *history.History
	Injected()
	Send(ctx context.Context, prompt string, io provider.TurnIO) (string, error)
	// End gives the session back, or stops and discards it.
	End(discard bool)
}

// Tools are one attempt's tool calls.
type Tools interface {
	// Caller is what the provider calls (provider.TurnIO.Tools).
	Caller() provider.ToolCaller
	// Open lets calls made with the agent's credential join the attempt
	// (one that suspends the run ends the attempt through suspend); Close
	// waits for those in flight and returns a suspension they caused.
	Open(ctx context.Context, suspend context.CancelCauseFunc)
	Close() error
	// Drain waits until the attempt's calls are logged; its error says a
	// tool.call could not be.
	Drain() error
}

// Ender is what the end needs beyond Append.
type Ender interface {
	// Owe records a run end that could not be logged.
	Owe(runID, event string, data any, cause error)
	// Suspended is the wait run runID suspended on and its resume secret
	// (handed out once), read together.
	Suspended(runID string) (wait *views.WaitInfo, token string)
}

// Aftermath is what finish needs.
type Aftermath interface {
	// LiveWait is session.json's form of the latest run's live wait (nil
	// when none).
	LiveWait() *session.Wait
	// Rest ends the running turn (not busy, settling; held after a
	// failure) and takes the work deferred during it and whether the
	// agent completes.
	Rest(held bool) (deferred []func(), completing bool)
	// Checkpoint asks for a checkpoint of the agent at rest.
	Checkpoint()
	// Settled: the aftermath is done (before Changed).
	Settled()
	// Changed fires the engine's change signal.
	Changed()
	Terminate() error
	// NotifyFailure tells the parent its child's turn failed.
	NotifyFailure()
	Wake()
}

// Runner runs turns. The zero value is not usable: every field is needed.
type Runner struct {
	BootID string
	Now    func() time.Time
	Log    hclog.Logger
}
