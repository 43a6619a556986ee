package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/provider"
)

// Session is one ACP session: an agent process and the session id it
// serves. Send is never called concurrently (the daemon holds the session
// for a turn).
type Session struct {
	p    *Provider
	spec provider.Spec
	st   Settings
	cwd  string
	log  hclog.Logger

	mu         sync.Mutex
	proc       *process
	conn       *conn
	cred       string // the process's credential, for the MCP server's env
	id         string
	canResume  bool
	canLoad    bool
	restoredBy string
	// replay: updates are discarded (they replay a loaded session) until
	// the next session/prompt.
	replay    bool
	discarded int
	turn      *turnState
	stopped   bool
	// preamble opens the first prompt of a new session (warren's system
	// prompt), until a prompt carrying it reached the agent.
	preamble string
}

var (
	_ provider.Session    = (*Session)(nil)
	_ provider.RestoredBy = (*Session)(nil)
)

// turnState is what the reader goroutine needs of the running turn. Its
// mu (not the session's) is held while a chunk is streamed, so a slow
// OnChunk delays only the turn's own output; closed stops the streaming
// once Send returns.
type turnState struct {
	mu      sync.Mutex
	closed  bool
	onChunk func(string)
	text    strings.Builder
	updates int
	bytes   int
	// maxText bounds bytes (the smaller of MaxTurnOutput and the entry's
	// MaxText, fixed when the turn starts).
	maxText   int
	perms     chan *message
	flood     chan struct{}
	floodOnce sync.Once
	// floodErr says which bound the agent passed (set before flood closes).
	floodErr error
	// mcpCalls: the MCP calls the turn's tool_call updates described, by
	// toolCallId (warrentool.go).
	mcpCalls map[string]mcpRef
	// failed is set when the agent said the model request failed (codex's
	// threadStatus systemError); failText is the text it streamed after.
	failed   bool
	failText strings.Builder
}

// Handle implements provider.Session: the ACP session id.
func (s *Session) Handle() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id
}

// RestoredBy implements provider.RestoredBy: "session/resume" or
// "session/load" for a restored session, "" for a new one.
func (s *Session) RestoredBy() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.restoredBy
}

// Discarded is how many session/update notifications were dropped because
// no turn was running or they replayed a loaded session.
func (s *Session) Discarded() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.discarded
}

// Pid is the agent process's pid (0 when none runs).
func (s *Session) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.pid
}

// spawn starts a fresh agent process and its connection.
func (s *Session) spawn() error {
	environ := os.Environ()
	env := provider.ProcessEnv(environ, provider.MergeEnv(provider.PassEnv(environ, s.st.EnvPass), s.st.Env, s.spec.Env))
	argv := s.st.Command
	if s.st.ModelFlag != "" && s.spec.Model != "" {
		argv = append(append([]string(nil), argv...), s.st.ModelFlag, s.spec.Model)
	}
	var launch provider.Launch
	if s.spec.Launcher != nil {
		var err error
		if launch, err = s.spec.Launcher.Prepare(); err != nil {
			return fmt.Errorf("preparing to start agent %q: %w", s.st.Command[0], err)
		}
		env = provider.MergeEnv(env, launch.Env())
	}
	proc, err := startProcess(s.p.opts.Spawner, argv, env, s.cwd, launch)
	if err != nil {
		if errors.Is(err, ErrNotInstalled) && s.st.InstallHint != "" {
			err = fmt.Errorf("%w; to install it: %s", err, s.st.InstallHint)
		}
		return provider.Permanent(fmt.Errorf("entry %q: cannot start the agent: %w", s.p.opts.Name, err))
	}
	cred := ""
	if launch != nil {
		cred = envValue(launch.Env(), provider.EnvCredential)
	}
	s.mu.Lock()
	s.proc, s.cred = proc, cred
	s.conn = newConn(proc.stdin, proc.reader(), s.p.opts.MaxLine, nil)
	c := s.conn
	c.handle = func(m *message) { s.handle(c, m) }
	s.mu.Unlock()
	c.startReading()
	s.log.Debug("agent started", "pid", proc.pid)
	return nil
}

func envValue(env []string, name string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}

// mcpServers is warren's MCP server for the session: "warren mcp-bridge"
// with the daemon's socket and the process's credential.
func (s *Session) mcpServers() []mcpServer {
	if s.p.opts.WarrenBinary == "" {
		return []mcpServer{}
	}
	s.mu.Lock()
	cred := s.cred
	s.mu.Unlock()
	env := []envVar{}
	if sock := envValue(s.spec.Env, provider.EnvSocket); sock != "" {
		env = append(env, envVar{Name: provider.EnvSocket, Value: sock})
	}
	if cred != "" {
		env = append(env, envVar{Name: provider.EnvCredential, Value: cred})
	}
	return []mcpServer{{Name: "warren", Command: s.p.opts.WarrenBinary, Args: []string{"mcp-bridge"}, Env: env}}
}

// open initializes the connection and creates (id == "") or restores the
// session, then sets the mode.
func (s *Session) open(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, s.p.opts.InitTimeout)
	defer cancel()
	var init initializeResult
	if err := s.rpc(ctx, "initialize", initializeParams{ProtocolVersion: ProtocolVersion,
		ClientInfo: implInfo{Name: "warren", Version: clientVersion()}}, &init); err != nil {
		return s.startErr("initialize", err)
	}
	s.mu.Lock()
	s.canResume, s.canLoad = init.canResume(), init.AgentCapabilities.LoadSession
	s.mu.Unlock()
	if id == "" {
		var res newSessionResult
		if err := s.rpc(ctx, "session/new", newSessionParams{Cwd: s.cwd, MCPServers: s.mcpServers()}, &res); err != nil {
			return s.startErr("session/new", err)
		}
		if res.SessionID == "" {
			return provider.Permanent(fmt.Errorf("%w: session/new answered no sessionId", ErrProtocol))
		}
		if len(res.SessionID) > MaxSessionID {
			return provider.Permanent(fmt.Errorf("%w: session/new answered a sessionId of %d bytes; warren takes at most %d (the id is the session's handle, logged in session.created): entry %q needs an agent that answers a short id",
				ErrProtocol, len(res.SessionID), MaxSessionID, s.p.opts.Name))
		}
		s.mu.Lock()
		s.id = res.SessionID
		s.mu.Unlock()
		return s.setMode(ctx, res.Modes)
	}
	if err := s.restore(ctx, id); err != nil {
		return err
	}
	return s.setMode(ctx, nil)
}

// restore brings session id back with session/resume or session/load.
func (s *Session) restore(ctx context.Context, id string) error {
	s.mu.Lock()
	method := ""
	switch {
	case s.canResume:
		method = MethodResume
	case s.canLoad:
		method = MethodLoad
		s.replay = true
	}
	s.id = id
	s.mu.Unlock()
	if method == "" {
		return fmt.Errorf("agent advertises neither session/resume nor session/load: %w", provider.ErrCannotRestore)
	}
	if len(id) > MaxSessionID {
		return fmt.Errorf("the session id to restore is %d bytes, over %d: %w", len(id), MaxSessionID, provider.ErrCannotRestore)
	}
	var res loadSessionResult
	err := s.rpc(ctx, method, loadSessionParams{SessionID: id, Cwd: s.cwd, MCPServers: s.mcpServers()}, &res)
	var rerr *RPCError
	if errors.As(err, &rerr) {
		// Each agent has its own code for an unknown session; every answer
		// that is an error means this session cannot come back.
		return fmt.Errorf("%s %s: %v: %w", method, id, err, provider.ErrCannotRestore)
	}
	if err != nil {
		return s.startErr(method, err)
	}
	if method == MethodLoad {
		// Some agents write part of the replay after the load's answer
		// (Gemini). A round trip the agent answers only after it read
		// this request lets what it wrote before pass while updates are
		// still discarded; any answer, an error included, will do.
		if err := s.rpc(ctx, barrierMethod, struct{}{}, nil); err != nil && !errors.As(err, &rerr) {
			return s.startErr(method, err)
		}
	}
	s.mu.Lock()
	s.restoredBy = method
	s.mu.Unlock()
	s.log.Debug("session restored", "method", method, "session_id", id)
	return nil
}

// barrierMethod is a request no agent serves: its answer (-32601) marks
// the end of what the agent wrote before reading it.
const barrierMethod = "$/warren/barrier"

// setMode sets the entry's mode, when it has one.
func (s *Session) setMode(ctx context.Context, modes *sessionModes) error {
	if s.st.Mode == "" {
		return nil
	}
	if modes != nil && modes.CurrentModeID == s.st.Mode {
		return nil
	}
	err := s.rpc(ctx, "session/set_mode", setModeParams{SessionID: s.Handle(), ModeID: s.st.Mode}, nil)
	var rerr *RPCError
	if errors.As(err, &rerr) {
		avail := ""
		if modes != nil {
			ids := make([]string, 0, len(modes.AvailableModes))
			for _, m := range modes.AvailableModes {
				ids = append(ids, m.ID)
			}
			avail = " (the agent offers: " + strings.Join(ids, ", ") + ")"
		}
		return provider.Permanent(fmt.Errorf("entry %q: setting mode %q: %v%s; fix the entry's \"mode\"", s.p.opts.Name, s.st.Mode, err, avail))
	}
	if err != nil {
		return s.startErr("session/set_mode", err)
	}
	return nil
}

// rpc makes one call on the current connection, bounded by ctx.
func (s *Session) rpc(ctx context.Context, method string, params, result any) error {
	s.mu.Lock()
	c := s.conn
	s.mu.Unlock()
	err := c.call(method, params, result, ctx.Done())
	if errors.Is(err, errCallCancelled) {
		return ctx.Err()
	}
	return err
}

// startErr classifies a failed start step: a JSON-RPC error or a broken
// protocol is permanent; an agent that died or did not answer in time is
// transient.
func (s *Session) startErr(step string, err error) error {
	var rerr *RPCError
	switch {
	case errors.As(err, &rerr):
		return provider.Permanent(fmt.Errorf("entry %q: the agent refused %s: %w", s.p.opts.Name, step, err))
	case errors.Is(err, context.DeadlineExceeded):
		return provider.Transient(fmt.Errorf("entry %q: %w: no answer to %s within %s", s.p.opts.Name, ErrTimeout, step, s.p.opts.InitTimeout), 0)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("entry %q: %s: %w", s.p.opts.Name, step, err)
	}
	return s.connErr(step, err)
}

// connErr is the error of a connection that ended during step.
func (s *Session) connErr(step string, err error) error {
	s.mu.Lock()
	proc := s.proc
	s.mu.Unlock()
	if errors.Is(err, ErrProtocol) {
		s.kill()
		return provider.Permanent(fmt.Errorf("entry %q, during %s: %w", s.p.opts.Name, step, err))
	}
	s.kill()
	desc := ""
	if proc != nil {
		desc = " (" + proc.describe() + ")"
	}
	return provider.Transient(fmt.Errorf("entry %q, during %s: %w%s", s.p.opts.Name, step, err, desc), 0)
}

// kill tears the agent's process group down; the session can come back
// through revive.
func (s *Session) kill() {
	s.mu.Lock()
	proc, c := s.proc, s.conn
	s.mu.Unlock()
	if proc != nil {
		proc.teardown()
	}
	if c != nil {
		c.fail(fmt.Errorf("%w: its process was killed", ErrAgentExited))
	}
}

// revive starts a fresh process for a session whose agent died and
// restores the session in it.
func (s *Session) revive(ctx context.Context) error {
	s.kill()
	if err := s.spawn(); err != nil {
		return err
	}
	s.log.Info("agent process had ended; started a fresh one and restoring its session", "session_id", s.Handle())
	if err := s.open(ctx, s.Handle()); err != nil {
		s.kill()
		if errors.Is(err, provider.ErrCannotRestore) {
			// Only a new provider session with the history can continue.
			return provider.Transient(fmt.Errorf("%w, and its session did not come back: %w", ErrAgentExited, err), 0)
		}
		return err
	}
	return nil
}

// Suspend implements provider.Session: the session id is all there is.
func (s *Session) Suspend(ctx context.Context) ([]byte, error) {
	return json.Marshal(blob{SessionID: s.Handle()})
}

// Stop implements provider.Session: close the agent's stdin, give it
// StopGrace to exit, then kill its process group.
func (s *Session) Stop() error {
	s.mu.Lock()
	s.stopped = true
	proc := s.proc
	s.mu.Unlock()
	if proc != nil {
		proc.stop(s.p.opts.StopGrace)
	}
	return nil
}

// deadline returns a channel that fires after d (nil: never).
func deadline(d time.Duration) (<-chan time.Time, func()) {
	if d <= 0 {
		return nil, func() {}
	}
	t := time.NewTimer(d)
	return t.C, func() { t.Stop() }
}
