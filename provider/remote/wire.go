package remote

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/sandbox"
)

// The protocol's names and timings (doc.go).
const (
	Bucket         = "warren-workers"
	ServiceName    = "warren-worker"
	HeartbeatEvery = time.Second
	LiveFor        = 5 * time.Second
	// BucketTTL is how long the bucket keeps a key after its last put.
	BucketTTL = 30 * time.Second
)

// Worker service operations.
const (
	OpOpen    = "open"
	OpSend    = "send"
	OpCancel  = "cancel"
	OpSuspend = "suspend"
	OpStop    = "stop"
	// OpPing answers {"boot": ...} at once: the daemon probes a worker
	// while a request to it is pending (doc.go).
	OpPing = "ping"
)

// Attempt traffic kinds.
const (
	KindChunk = "chunk"
	KindUsage = "usage"
	KindTool  = "tool"
	KindGate  = "gate"
)

// WorkerSubject is the subject of a worker's operation.
func WorkerSubject(worker, op string) string { return "warren.worker." + worker + "." + op }

// WorkerGroup is the subject prefix of a worker's service.
func WorkerGroup(worker string) string { return "warren.worker." + worker }

// AttemptSubject is the subject of an attempt's traffic of one kind,
// from the worker it was sent to, to the daemon whose boot id is daemon.
// The worker's id is in the subject so that the servers can hold a
// worker to its own (WorkerSubjects): the router takes the sender from
// the subject and drops what a worker sends for another's attempt.
func AttemptSubject(daemon, worker, attempt, kind string) string {
	return "warren.attempt." + daemon + "." + worker + "." + attempt + "." + kind
}

// attemptWildcard is what a daemon's router subscribes to: its own
// attempts only (a cluster's standbys subscribe to theirs).
func attemptWildcard(daemon string) string { return "warren.attempt." + daemon + ".*.*.*" }

// StderrSubject carries what the processes of a session write to stderr,
// from its worker to the daemon (boot id daemon) that opened it, in
// chunks of at most StderrChunkMax bytes, in order; the daemon keeps them
// in the agent's stderr.log. Best effort, as the file is (doc.go).
func StderrSubject(daemon, worker, session string) string {
	return "warren.stderr." + daemon + "." + worker + "." + session
}

// stderrWildcard is what a daemon subscribes to for its sessions' stderr.
func stderrWildcard(daemon string) string { return "warren.stderr." + daemon + ".*.*" }

// InboxPrefix is the prefix of a worker's reply subjects (nats.go's
// CustomInboxPrefix), which the servers let it subscribe to
// (WorkerSubjects) in place of every client's _INBOX.>.
func InboxPrefix(worker string) string { return "_INBOX.worker." + worker }

// WorkerSubjects are the subjects a worker may publish to and subscribe
// to, as an nkey user of a daemon's embedded server (doc.go,
// Authority): its beats and its key of the bucket, its own service, its
// attempts' traffic and its sessions' stderr, its own inbox. It may
// answer a request made to it (the servers' response permission), and
// nothing else: not the logs' stream, not another worker's subjects,
// not the daemon's inbox.
func WorkerSubjects(worker string) (publish, subscribe []string) {
	publish = []string{
		BeatSubject,
		"$KV." + Bucket + "." + worker,
		"$JS.API.STREAM.INFO.KV_" + Bucket, // binding the bucket (the daemon makes it)
		"warren.attempt.*." + worker + ".*.*",
		"warren.stderr.*." + worker + ".*",
	}
	subscribe = []string{
		WorkerGroup(worker) + ".>",
		// The micro service's discovery: PING, INFO and STATS, of every
		// service, of this one, of this instance.
		"$SRV.*", "$SRV.*." + ServiceName, "$SRV.*." + ServiceName + ".*",
		InboxPrefix(worker) + ".>",
	}
	return publish, subscribe
}

// StderrChunkMax bounds one stderr message.
const StderrChunkMax = 16 << 10

// BeatSubject carries each worker's registration on core NATS, beside
// the bucket: liveness must not depend on a JetStream leader (doc.go).
const BeatSubject = "warren.workers.beat"

var idPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// CheckID refuses an id (a worker's, a daemon's boot, an attempt's)
// that cannot be one subject token and a bucket key.
func CheckID(id string) error {
	if !idPattern.MatchString(id) {
		return fmt.Errorf("id %q: use 1-64 letters, digits, '-' or '_'", id)
	}
	return nil
}

// NewAttemptID is 128 random bits in hex.
func NewAttemptID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// Registration is a worker's entry in the bucket.
type Registration struct {
	Worker string `json:"worker"`
	Boot   string `json:"boot"`
	// Started is when this boot started (Unix nanoseconds, the worker's
	// clock): of two boots of one worker the later start is in force.
	Started int64                `json:"started"`
	Pools   map[string]PoolState `json:"pools"`
	Labels  map[string]string    `json:"labels,omitempty"`
	// Beat counts the worker's heartbeats since its boot.
	Beat uint64 `json:"beat"`
	// Leaving is the last heartbeat of a worker that stops: the daemon
	// loses its boot at once.
	Leaving bool `json:"leaving,omitempty"`
}

// PoolState is one pool of a worker: its size and its live sessions.
type PoolState struct {
	Size int `json:"size"`
	Live int `json:"live"`
}

// Check validates a registration read from the bucket under key.
func (r Registration) Check(key string) error {
	if r.Worker != key {
		return fmt.Errorf("registration under %q names worker %q", key, r.Worker)
	}
	if err := CheckID(r.Worker); err != nil {
		return err
	}
	if r.Boot == "" {
		return errors.New("registration has no boot id")
	}
	for name, p := range r.Pools {
		if name == "" || p.Size < 0 || p.Live < 0 {
			return fmt.Errorf("registration of %s: pool %q has size %d, live %d", r.Worker, name, p.Size, p.Live)
		}
	}
	return nil
}

// OpenRequest asks a worker to create (Restore false) or restore a
// session of provider entry Provider under the daemon's id Session.
type OpenRequest struct {
	Session  string `json:"session"`
	Provider string `json:"provider"`
	// Daemon is the daemon's boot id (doc.go).
	Daemon  string `json:"daemon"`
	Restore bool   `json:"restore,omitempty"`
	Blob    []byte `json:"blob,omitempty"`
	Handle  string `json:"handle,omitempty"`
	Spec    Spec   `json:"spec"`
}

// Spec is provider.Spec without what only the daemon's machine has (the
// process environment, the launcher): the worker computes the
// environment from its own config entry.
type Spec struct {
	AgentID      string            `json:"agent_id"`
	Model        string            `json:"model"`
	Instructions string            `json:"instructions"`
	Cwd          string            `json:"cwd,omitempty"`
	System       string            `json:"system,omitempty"`
	History      []Turn            `json:"history,omitempty"`
	HistoryMode  string            `json:"history_mode,omitempty"`
	Identity     provider.Identity `json:"identity"`
	// Sandbox: the worker runs the agent in bubblewrap (never without).
	Sandbox *sandbox.Spec `json:"sandbox,omitempty"`
	// Workspace: the agent runs in the worker's copy of its workspace,
	// which takes up Lease (package workspace) before the agent starts;
	// Cwd is then the daemon's and not used.
	Workspace *Hand `json:"workspace,omitempty"`
}

// Hand is a hold on an agent's workspace: the agents' remote, the lease
// commit the daemon pushed there, the agent's branch, and for an
// attempt the message of the end snapshot the worker hands back.
type Hand struct {
	Remote  string `json:"remote"`
	Lease   string `json:"lease"`
	Branch  string `json:"branch"`
	Message string `json:"message,omitempty"`
}

// Turn is provider.Turn with its calls' ids.
type Turn struct {
	Message  string     `json:"message"`
	Calls    []ToolCall `json:"calls"`
	Response string     `json:"response"`
}

// ToolCall is provider.ToolCall with its id.
type ToolCall struct {
	ID     string         `json:"id,omitempty"`
	Tool   string         `json:"tool"`
	Args   map[string]any `json:"args"`
	Result map[string]any `json:"result,omitempty"`
	Error  string         `json:"error,omitempty"`
}

// SpecOf is the wire form of s.
func SpecOf(s provider.Spec) Spec {
	w := Spec{AgentID: s.AgentID, Model: s.Model, Instructions: s.Instructions, Cwd: s.Cwd, System: s.System,
		HistoryMode: s.HistoryMode, Identity: s.Identity, Sandbox: s.Sandbox}
	for _, t := range s.History {
		wt := Turn{Message: t.Message, Response: t.Response, Calls: make([]ToolCall, 0, len(t.Calls))}
		for _, c := range t.Calls {
			wt.Calls = append(wt.Calls, ToolCall{ID: c.ID, Tool: c.Tool, Args: c.Args, Result: c.Result, Error: c.Error})
		}
		w.History = append(w.History, wt)
	}
	return w
}

// Provider is the provider.Spec of w (without Env and Launcher).
func (w Spec) Provider() provider.Spec {
	s := provider.Spec{AgentID: w.AgentID, Model: w.Model, Instructions: w.Instructions, Cwd: w.Cwd, System: w.System,
		HistoryMode: w.HistoryMode, Identity: w.Identity, Sandbox: w.Sandbox}
	for _, t := range w.History {
		pt := provider.Turn{Message: t.Message, Response: t.Response, Calls: make([]provider.ToolCall, 0, len(t.Calls))}
		for _, c := range t.Calls {
			pt.Calls = append(pt.Calls, provider.ToolCall{ID: c.ID, Tool: c.Tool, Args: c.Args, Result: c.Result, Error: c.Error})
		}
		s.History = append(s.History, pt)
	}
	return s
}

// OpenReply answers an OpenRequest.
type OpenReply struct {
	Handle     string `json:"handle,omitempty"`
	RestoredBy string `json:"restored_by,omitempty"`
	// Workspace is the lease the worker took up (Spec.Workspace): the
	// daemon refuses a worker that opened the session without it.
	Workspace string     `json:"workspace,omitempty"`
	Error     *WireError `json:"error,omitempty"`
}

// SendRequest runs one attempt of a turn.
type SendRequest struct {
	Session string `json:"session"`
	// Daemon is the daemon's boot id: the attempt's subjects name it.
	Daemon  string `json:"daemon"`
	Attempt string `json:"attempt"`
	Prompt  string `json:"prompt"`
	// Workspace: the attempt takes up the lease first and, when the
	// agent's turn ends (succeeded, failed, cancelled or suspended its
	// run), hands its copy back (SendReply.Snapshot).
	Workspace *Hand `json:"workspace,omitempty"`
}

// HandBackWait is how long the daemon waits, after it cancels an attempt
// that holds a workspace, for the answer that carries what the agent
// left (SendReply.Snapshot); the worker bounds its hand-back by it too.
const HandBackWait = 10 * time.Second

// SendReply answers a SendRequest when the turn ends.
type SendReply struct {
	Response string     `json:"response"`
	Error    *WireError `json:"error,omitempty"`
	// Chunks and Usages count what the worker published for the
	// attempt: the daemon delivers them all before Send returns (they
	// reach it on another subscription than the answer).
	Chunks int `json:"chunks"`
	Usages int `json:"usages"`
	// Snapshot is the end snapshot the worker handed back on the agents'
	// remote (SendRequest.Workspace), with an Error too when the turn
	// failed or was cancelled.
	Snapshot string `json:"snapshot,omitempty"`
}

// SessionRequest names a session (suspend, stop).
type SessionRequest struct {
	Session string `json:"session"`
}

// SuspendReply answers suspend.
type SuspendReply struct {
	Blob  []byte     `json:"blob,omitempty"`
	Error *WireError `json:"error,omitempty"`
}

// PingReply answers a ping.
type PingReply struct {
	Boot string `json:"boot"`
}

// CancelRequest cancels an attempt (published; no answer).
type CancelRequest struct {
	Attempt string `json:"attempt"`
}

// Chunk is a piece of a turn's text.
type Chunk struct {
	Seq  int    `json:"seq"`
	Text string `json:"text"`
}

// ToolRequest is one tool call of an attempt.
type ToolRequest struct {
	Tool string         `json:"tool"`
	Args map[string]any `json:"args"`
}

// ToolReply answers a ToolRequest (and a gate: Error only).
type ToolReply struct {
	Result map[string]any `json:"result,omitempty"`
	Error  *WireError     `json:"error,omitempty"`
}

// WireError is an error across the wire, with the kind the engine tells
// apart (doc.go).
type WireError struct {
	Kind         string `json:"kind"`
	Message      string `json:"message"`
	RetryAfterMS int64  `json:"retry_after_ms,omitempty"`
}

// Error kinds.
const (
	KindTransient     = "transient"
	KindPermanent     = "permanent"
	KindSuspended     = "suspended"
	KindCannotRestore = "cannot_restore"
	KindCanceled      = "canceled"
	KindAbandoned     = "abandoned"
	KindPoolFull      = "pool_full"
	// KindLost: the worker does not hold the session (it restarted).
	KindLost = "lost"
	// KindRefused: the worker refused the request (not from the daemon
	// of its token, a replay, clocks more than RequestWindow apart).
	KindRefused = "refused"
)

// maxRetryAfterMS bounds a worker's requested retry delay (an hour).
const maxRetryAfterMS = 3600 * 1000

// ErrAbandoned is wrapped by the error a worker's tool call gets when the
// daemon has given its attempt up.
var ErrAbandoned = errors.New("the daemon gave this attempt up")

// ErrPoolFull is wrapped by an open refused because the pool is full.
var ErrPoolFull = errors.New("the worker's pool is full")

// Wire is the wire form of err (nil for nil).
func Wire(err error) *WireError {
	if err == nil {
		return nil
	}
	w := &WireError{Kind: KindPermanent, Message: err.Error()}
	switch {
	case errors.Is(err, provider.ErrRunSuspended):
		w.Kind = KindSuspended
	case errors.Is(err, provider.ErrCannotRestore):
		w.Kind = KindCannotRestore
	case errors.Is(err, ErrAbandoned):
		w.Kind = KindAbandoned
	case errors.Is(err, ErrPoolFull):
		w.Kind = KindPoolFull
	default:
		if t, after := provider.IsTransient(err); t {
			w.Kind, w.RetryAfterMS = KindTransient, after.Milliseconds()
		} else if isCanceled(err) {
			w.Kind = KindCanceled
		}
	}
	return w
}

// Err is the Go error of w, wrapping the sentinel of its kind.
func (w *WireError) Err() error {
	if w == nil {
		return nil
	}
	msg := errors.New(w.Message)
	switch w.Kind {
	case KindSuspended:
		return fmt.Errorf("%w: %v", provider.ErrRunSuspended, msg)
	case KindCannotRestore:
		return fmt.Errorf("%w: %v", provider.ErrCannotRestore, msg)
	case KindTransient:
		return provider.Transient(msg, time.Duration(min(max(w.RetryAfterMS, 0), maxRetryAfterMS))*time.Millisecond)
	case KindLost, KindRefused:
		return provider.Transient(fmt.Errorf("%w: %v", errLost, msg), 0)
	case KindAbandoned:
		return fmt.Errorf("%w: %v", ErrAbandoned, msg)
	case KindPoolFull:
		return fmt.Errorf("%w: %v", ErrPoolFull, msg)
	case KindCanceled:
		return provider.Transient(fmt.Errorf("canceled on the worker: %v", msg), 0)
	}
	return provider.Permanent(msg)
}

func isCanceled(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
