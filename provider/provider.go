// Package provider defines what warren needs from an LLM provider, an agent
// CLI or a scripted program: create, restore, send (streaming, with tool
// calls), suspend and stop a session, and the capabilities that decide how a
// session comes back after an eviction or a restart.
package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/warren-dev/warren/sandbox"
	"github.com/warren-dev/warren/schema"
)

// Capabilities declares how a provider's sessions can be brought back.
type Capabilities struct {
	// NativeResume: Restore with only the handle recorded at creation
	// restores the provider's own conversation state.
	NativeResume bool
	// StructuredHistory: the provider takes the completed turns as
	// Spec.History (the scripted provider replays them to its program) instead
	// of a text history block in the first prompt.
	StructuredHistory bool
	// HistoryOnRestore: Restore from a Suspend blob also takes the
	// completed turns as Spec.History, read from the agent's log. The blob
	// then stays small (a handle, never the conversation), so session.json
	// never duplicates the history the log holds.
	HistoryOnRestore bool
}

// Provider creates and restores sessions. Implementations are safe for
// concurrent use.
type Provider interface {
	Name() string
	Capabilities() Capabilities
	// Create starts a new session. Session.Handle returns its native resume
	// handle, which the daemon records in session.created.
	Create(ctx context.Context, spec Spec) (Session, error)
	// Restore brings a session back from the blob a Suspend returned or, when
	// blob is nil, from the handle recorded at creation. A provider that
	// cannot restore returns an error wrapping ErrCannotRestore; the daemon
	// then creates a fresh session and injects the history.
	Restore(ctx context.Context, spec Spec, blob []byte, handle string) (Session, error)
}

// ModelChecker is implemented by providers that can tell, before a run,
// whether they serve a model. The daemon refuses a run on a model the
// provider does not serve as invalid input instead of failing the run.
type ModelChecker interface {
	// CheckModel returns nil if the provider serves model, else an error
	// that says what is wrong and what is available.
	CheckModel(model string) error
}

// Spec describes the agent a session serves.
type Spec struct {
	AgentID      string
	Model        string
	Instructions string
	// Cwd is the agent's working directory (absolute): the directory its
	// processes run in. Empty means the daemon's own working directory
	// (an agent created before agents had one).
	Cwd string
	// System is the whole system prompt for providers that take one (the
	// HTTP types): the instructions followed by the daemon's identity
	// block. Empty means Instructions.
	System string
	// Env is environment for provider processes (KEY=VALUE) on top of
	// the default allow-list of the daemon's environment (ProcessEnv): the
	// entry's env_pass and env settings, WARREN_SOCKET, WARREN_AGENT_ID.
	// Providers give their processes nothing else of the daemon's
	// environment.
	Env []string
	// Launcher, when set, takes part in every process the provider starts
	// for this session (credential, record; see Launcher).
	Launcher Launcher
	// History holds the completed turns, for providers with
	// StructuredHistory (passed on the first turn of a fresh process), and
	// for Restore from a blob of providers with HistoryOnRestore.
	History []Turn
	// HistoryMode says how a provider with StructuredHistory passes
	// History to a fresh process: HistoryReplay ("", the default) for a
	// replay the program re-executes, HistoryContext for data it reads.
	HistoryMode string
	// Identity names the agent in its tree (the scripted provider gives
	// it to each program on its first turn).
	Identity Identity
	// Local says why the session must run on the daemon's machine (its
	// workspace, an acp agent's tools through the daemon's socket); ""
	// when a remote worker may run it (provider/remote).
	Local string
	// Sandbox is the sandbox the agent runs in (nil: none). Launcher
	// applies it on the daemon's machine; a remote worker builds its own
	// from it, with the bind paths on the worker's machine.
	Sandbox *sandbox.Spec
	// Workspace, when set, lets a remote worker run the session of an
	// agent whose workspace (Cwd) is on the daemon's machine: the worker
	// keeps a copy of it, which each attempt takes up and hands back
	// through the agents' remote (TurnIO.Workspace, package workspace).
	// Local sessions ignore it.
	Workspace *WorkspaceSpec
}

// WorkspaceSpec is where an agent's workspace moves to run on a worker.
type WorkspaceSpec struct {
	// Remote is the agents' remote: a git URL the daemon and the worker
	// reach.
	Remote string
	// Lease hands the workspace as it is now to a session being opened
	// on a worker (its Lease and Branch), which takes it up before the
	// agent's process starts.
	Lease func(ctx context.Context) (WorkspaceHand, error)
}

// WorkspaceHand is an attempt's hold on the agent's workspace, when the
// session runs away from it (WorkspaceAway): before the attempt the
// session's copy takes up Lease, a commit of the workspace on the agents'
// remote; after the attempt (one that succeeded, failed, was cancelled
// or suspended its run) it records its copy as a
// snapshot whose message is Message, hands it back on the remote and sets
// Snapshot to it, with Send's error when the attempt did not succeed.
type WorkspaceHand struct {
	Lease, Branch, Message string
	// Snapshot is set by the session: the end snapshot it handed back.
	Snapshot string
}

// WorkspaceAway is implemented by sessions that may run away from the
// agent's workspace (provider/remote): the agents' remote the session's
// copy of the workspace moves through ("" when it runs in the agent's
// workspace); each attempt then needs a TurnIO.Workspace.
type WorkspaceAway interface {
	AwayRemote() string
}

// History modes (Spec.HistoryMode).
const (
	HistoryReplay  = "replay"
	HistoryContext = "context"
)

// Identity is who an agent is in its tree, when its session opened.
type Identity struct {
	Name string `json:"name"`
	// Path is the slash path from its root ("lead/worker").
	Path string `json:"path"`
	// Parent is the parent's name and ParentID its id; both "" for a
	// root agent (which reports to USER).
	Parent   string `json:"parent"`
	ParentID string `json:"parent_id"`
}

// Session is one live provider session. Send is never called concurrently on
// one Session (the daemon holds it for the duration of a turn).
type Session interface {
	// Handle is the native resume handle ("" when the provider has none).
	Handle() string
	// Send runs one turn and returns the response. Text is streamed through
	// io.OnChunk as it is produced; tool calls go through io.Tools. When ctx
	// is cancelled the work stops (a subprocess is killed) and Send returns
	// an error wrapping ctx.Err().
	Send(ctx context.Context, prompt string, io TurnIO) (string, error)
	// Suspend returns an opaque blob from which Restore can rebuild the
	// session.
	Suspend(ctx context.Context) ([]byte, error)
	// Stop releases the session's resources (kills its process).
	Stop() error
}

// TurnIO connects a turn to the daemon.
type TurnIO struct {
	Tools   ToolCaller
	OnChunk func(text string)
	// OnUsage, when set, receives the token usage of each model request of
	// the turn, as the provider reports it.
	OnUsage func(Usage)
	// BeforeRequest, when set, is called before each model request of the
	// turn (providers that make the requests themselves); an error ends the
	// turn with it (ErrRunSuspended: a budget is spent, SPEC 13).
	BeforeRequest func() error
	// Workspace, when set, is the attempt's hold on the agent's workspace
	// (a session that runs away from it: WorkspaceAway).
	Workspace *WorkspaceHand
}

// Usage is the token usage a provider reports (schema.Usage: it is logged
// in turn.complete as it is).
type Usage = schema.Usage

// RestoredBy is implemented by sessions that can say how Restore brought
// them back (e.g. "session/resume" or "session/load" for an ACP agent);
// the daemon logs it in session.restored.
type RestoredBy interface {
	RestoredBy() string
}

// Lost is implemented by sessions that can tell they are gone for good
// (a remote worker that stopped answering: provider/remote). The daemon
// then discards the session and opens the agent's session again,
// restored from its log, before it retries the turn.
type Lost interface {
	Lost() bool
}

// ToolCaller runs an agent tool for the session's agent. A tool-level
// failure is a normal result of the form {"error": "..."}; a Go error means
// the call could not be made at all. An error wrapping ErrRunSuspended means
// the run is now waiting for input: the provider must end the turn at once,
// returning an error that wraps it, and may discard the live state of the
// turn (the daemon re-runs it on resume, answering recorded calls from the
// log).
type ToolCaller interface {
	CallTool(ctx context.Context, tool string, args map[string]any) (map[string]any, error)
}

// ToolRequest is one tool call of a model step.
type ToolRequest struct {
	Tool string
	Args map[string]any
}

// ToolResponse is the outcome of one ToolRequest, as CallTool returns it.
type ToolResponse struct {
	Result map[string]any
	Err    error
}

// BatchToolCaller is implemented by ToolCallers that can run the tool calls
// of one model step together, as models emit several tool-use blocks in one
// message. The calls take consecutive positions in request order, exactly as
// if CallTool had been called for each in turn, and the responses come back
// in request order. A caller may run them one by one (it must when they
// depend on each other); providers should use CallTools only for calls the
// model issued together.
type BatchToolCaller interface {
	ToolCaller
	CallTools(ctx context.Context, calls []ToolRequest) []ToolResponse
}

// Turn is one completed turn, as replayed to providers with
// StructuredHistory. The JSON shape is the scripted protocol's history entry.
type Turn struct {
	Message  string     `json:"message"`
	Calls    []ToolCall `json:"calls"`
	Response string     `json:"response"`
}

// ToolCall is one tool call inside a Turn: Result on success, Error on a
// tool-level failure.
type ToolCall struct {
	// ID is the call's call_id in the event log ("" when unknown). It is
	// not part of the scripted protocol's history entry; the HTTP providers
	// derive the tool-call ids of replayed history from it.
	ID     string         `json:"-"`
	Tool   string         `json:"tool"`
	Args   map[string]any `json:"args"`
	Result map[string]any `json:"result,omitempty"`
	Error  string         `json:"error,omitempty"`
}

// ToolErrorText is the text a ToolCall records for the "error" member of a
// tool's result: the string itself, or the JSON of another value.
func ToolErrorText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

var (
	// ErrRunSuspended is returned through ToolCaller (and then from Send)
	// when a tool call put the run into a wait for external input.
	ErrRunSuspended = errors.New("run suspended waiting for input")
	// ErrCannotRestore means Restore had nothing to restore from.
	ErrCannotRestore = errors.New("provider cannot restore this session")
)

// Error classifies a provider failure. Transient errors (timeouts,
// connection errors, HTTP 429 and 5xx, a crashed provider process) are
// retried by the daemon; others fail the turn at once.
type Error struct {
	Transient bool
	// RetryAfter is the provider's requested delay (0 when it gave none).
	RetryAfter time.Duration
	Err        error
}

func (e *Error) Error() string {
	kind := "permanent"
	if e.Transient {
		kind = "transient"
	}
	return fmt.Sprintf("%s provider error: %v", kind, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Transient wraps err as a transient error with an optional Retry-After.
func Transient(err error, retryAfter time.Duration) error {
	return &Error{Transient: true, RetryAfter: retryAfter, Err: err}
}

// Permanent wraps err as a permanent error.
func Permanent(err error) error { return &Error{Err: err} }

// IsTransient reports whether err is a transient provider error and the
// delay the provider asked for.
func IsTransient(err error) (bool, time.Duration) {
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Transient, pe.RetryAfter
	}
	return false, 0
}
