package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/agentproc"
	"github.com/warren-dev/warren/provider"
)

// Permission policies (the entry's "permissions" setting).
const (
	PermAllow = "allow"
	PermDeny  = "deny"
	PermAsk   = "ask"
)

// WaitKind is the kind of the operator wait a permission request under
// the ask policy becomes.
const WaitKind = "permission"

// PermissionWaitTimeout is the deadline of a permission wait: the
// operator has this long to answer before the wait expires (the run is
// then interrupted, as for any await_input).
const PermissionWaitTimeout = 24 * time.Hour

// Restore methods, as RestoredBy reports them.
const (
	MethodResume = "session/resume"
	MethodLoad   = "session/load"
)

// Defaults applied by New to zero Options fields.
const (
	DefaultInitTimeout    = 60 * time.Second
	DefaultCancelGrace    = 5 * time.Second
	DefaultStopGrace      = 2 * time.Second
	DefaultMaxLine        = 16 << 20
	DefaultMaxTurnOutput  = 64 << 20
	DefaultMaxTurnUpdates = 200_000
	// MaxSessionID bounds the session id an agent may answer session/new
	// with: the id is the session's handle, logged in session.created.
	MaxSessionID = 256
)

var (
	// ErrNoCommand means the entry has no command.
	ErrNoCommand = errors.New("acp provider entry has no \"command\": set it in config.json (an argv list, e.g. [\"claude-agent-acp\"])")
	// ErrNotInstalled means the entry's command cannot be found.
	ErrNotInstalled = errors.New("agent command not found: install the agent CLI (see README, \"Run a team of coding agents\") or fix the entry's \"command\"")
	// ErrAgentExited is wrapped by the transient error of a turn whose
	// agent process exited or closed its stdout.
	ErrAgentExited = errors.New("agent process exited unexpectedly")
	// ErrTimeout is wrapped by the transient error of a turn or a start
	// that ran over its bound (the agent was killed).
	ErrTimeout = errors.New("agent did not answer in time")
	// ErrFlood is wrapped by the permanent error of a turn whose agent sent
	// more updates or text than Options.MaxTurnUpdates / MaxTurnOutput.
	ErrFlood = errors.New("agent sent more output in one turn than the limit")
	// ErrStopped is returned by Send on a stopped session.
	ErrStopped = errors.New("acp session is stopped")
	// ErrResponseTooLong is wrapped by the permanent error of a turn whose
	// agent streamed more text than Settings.MaxText.
	ErrResponseTooLong = errors.New("agent's response text larger than the message limit")
)

// Settings are an entry's settings, read for every process start and turn
// so that a config reload applies to the next one.
type Settings struct {
	// Command is the agent's argv.
	Command []string
	// Env is environment for the agent (KEY=VALUE) under the entry's own
	// (Spec.Env wins): a built-in entry's defaults.
	Env []string
	// EnvPass names variables of the daemon's environment (or prefixes
	// ending in '*') the agent gets besides the default allow-list: a
	// built-in entry's defaults (its API key variables).
	EnvPass []string
	// InstallHint says how to install the agent (a built-in entry's npm
	// package), added to the error of a command that is not found.
	InstallHint string
	// ModelFlag, when set, passes Spec.Model to the agent as
	// "ModelFlag MODEL" after Command (gemini's -m).
	ModelFlag string
	// Mode is the session mode set after session/new and on restore
	// ("" leaves the agent's default).
	Mode string
	// Permissions is the policy for session/request_permission (allow,
	// deny, ask; "" means ask).
	Permissions string
	// Timeout bounds one turn, from session/prompt to its answer, not
	// counting an operator's answer (0: no bound; the daemon's
	// turn_timeout_s still applies).
	Timeout time.Duration
	// MaxText is the message limit (config limits.message_bytes): the most
	// response text one turn may stream; past it the agent is cancelled
	// and the turn fails (0: only Options.MaxTurnOutput bounds it).
	MaxText int
}

// Options configures a Provider.
type Options struct {
	// Name is the provider entry's name (logs, errors).
	Name string
	// Settings returns the entry's current settings.
	Settings func() Settings
	// WarrenBinary is the warren executable the agent starts as its MCP
	// server ("warren mcp-bridge"); empty passes no MCP server.
	WarrenBinary string
	// Cwd is the working directory of agents whose Spec has none (empty:
	// the daemon's).
	Cwd string
	// InitTimeout bounds starting a session: initialize, session/new or
	// the restore, set_mode (default 60 s).
	InitTimeout time.Duration
	// CancelGrace is how long a cancelled turn waits for the agent's
	// answer before its process group is killed (default 5 s).
	CancelGrace time.Duration
	// StopGrace is how long Stop waits for the agent to exit after its
	// stdin is closed (default 2 s).
	StopGrace time.Duration
	// MaxLine is the longest line accepted from an agent (default 16 MiB).
	MaxLine int
	// MaxTurnOutput and MaxTurnUpdates bound what one turn may stream
	// (defaults 64 MiB of text, 200000 updates).
	MaxTurnOutput  int
	MaxTurnUpdates int
	Logger         hclog.Logger
	// Spawner starts the agent processes (nil: the provider makes one).
	Spawner *agentproc.Spawner
}

// Provider is the acp provider of one entry. Safe for concurrent use.
type Provider struct {
	opts Options
	log  hclog.Logger
}

var _ provider.Provider = (*Provider)(nil)

// New returns a Provider, filling defaults into opts.
func New(opts Options) *Provider {
	if opts.Name == "" {
		opts.Name = "acp"
	}
	if opts.InitTimeout <= 0 {
		opts.InitTimeout = DefaultInitTimeout
	}
	if opts.CancelGrace <= 0 {
		opts.CancelGrace = DefaultCancelGrace
	}
	if opts.StopGrace <= 0 {
		opts.StopGrace = DefaultStopGrace
	}
	if opts.MaxLine <= 0 {
		opts.MaxLine = DefaultMaxLine
	}
	if opts.MaxTurnOutput <= 0 {
		opts.MaxTurnOutput = DefaultMaxTurnOutput
	}
	if opts.MaxTurnUpdates <= 0 {
		opts.MaxTurnUpdates = DefaultMaxTurnUpdates
	}
	if opts.Spawner == nil {
		opts.Spawner = agentproc.NewSpawner()
	}
	if opts.Settings == nil {
		opts.Settings = func() Settings { return Settings{} }
	}
	log := opts.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Provider{opts: opts, log: log.Named("acp").With("entry", opts.Name)}
}

// Name implements provider.Provider.
func (p *Provider) Name() string { return p.opts.Name }

// Capabilities implements provider.Provider: the ACP session id is a
// native resume handle; the history is injected (as a text block) only
// when the agent cannot restore it.
func (p *Provider) Capabilities() provider.Capabilities {
	return provider.Capabilities{NativeResume: true}
}

// settings returns the current settings, checked.
func (p *Provider) settings() (Settings, error) {
	st := p.opts.Settings()
	if len(st.Command) == 0 || st.Command[0] == "" {
		return st, provider.Permanent(fmt.Errorf("entry %q: %w", p.opts.Name, ErrNoCommand))
	}
	switch st.Permissions {
	case "":
		st.Permissions = PermAsk
	case PermAllow, PermDeny, PermAsk:
	default:
		return st, provider.Permanent(fmt.Errorf("entry %q: permissions %q must be allow, deny or ask", p.opts.Name, st.Permissions))
	}
	return st, nil
}

// Create implements provider.Provider: start the agent, initialize,
// session/new with warren's MCP server, set the mode.
func (p *Provider) Create(ctx context.Context, spec provider.Spec) (provider.Session, error) {
	s, err := p.start(ctx, spec)
	if err != nil {
		return nil, err
	}
	if err := s.open(ctx, ""); err != nil {
		s.kill()
		return nil, err
	}
	// The agent CLI keeps its own system prompt; warren's (the agent's
	// instructions and identity block) opens the session's first prompt.
	sys := spec.System
	if sys == "" {
		sys = spec.Instructions
	}
	if sys != "" {
		s.preamble = sys + "\n\n" + PreambleEnd + "\n\n"
	}
	return s, nil
}

// PreambleEnd closes warren's system prompt at the head of a session's
// first prompt.
const PreambleEnd = "=== END OF WARREN'S INSTRUCTIONS; THE REQUEST FOLLOWS ==="

// blob is the Suspend format.
type blob struct {
	SessionID string `json:"session_id"`
}

// Restore implements provider.Provider: start the agent and restore the
// session (the blob's, else the handle) with session/resume when the agent
// advertises it, else session/load, discarding the updates the load
// replays. An agent that can do neither, or answers the restore with any
// JSON-RPC error, gives ErrCannotRestore (the daemon then starts a fresh
// session with the history); an agent that dies or hangs gives a transient
// error.
func (p *Provider) Restore(ctx context.Context, spec provider.Spec, data []byte, handle string) (provider.Session, error) {
	id := handle
	if len(data) > 0 {
		var b blob
		if err := json.Unmarshal(data, &b); err == nil && b.SessionID != "" {
			id = b.SessionID
		}
	}
	if id == "" {
		return nil, fmt.Errorf("acp restore: no session id: %w", provider.ErrCannotRestore)
	}
	s, err := p.start(ctx, spec)
	if err != nil {
		return nil, err
	}
	if err := s.open(ctx, id); err != nil {
		s.kill()
		return nil, err
	}
	return s, nil
}

// start makes a session value and starts its agent process.
func (p *Provider) start(ctx context.Context, spec provider.Spec) (*Session, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	st, err := p.settings()
	if err != nil {
		return nil, err
	}
	cwd := spec.Cwd
	if cwd == "" {
		cwd = p.opts.Cwd
	}
	if cwd == "" {
		if cwd, err = os.Getwd(); err != nil {
			return nil, fmt.Errorf("acp: the daemon's working directory: %w", err)
		}
	}
	s := &Session{p: p, spec: spec, st: st, cwd: cwd,
		log: p.log.With("agent_id", spec.AgentID, "command", strings.Join(st.Command, " "))}
	if err := s.spawn(); err != nil {
		return nil, err
	}
	return s, nil
}
