// Package launch is the daemon's part in each agent process
// (docs/DECISIONS.md, "Agent processes: environment, credential,
// lifetime"). Every process a provider starts for an agent gets a fresh
// credential in WARREN_AGENT_CREDENTIAL, known only to this daemon's
// memory, and a fresh marker in WARREN_AGENT_PROCESS (agentproc.EnvMarker),
// and is recorded in <home>/procs (agentproc.Records, the marker included)
// before it gets any work; both go when it has been reaped. Its stderr goes to the
// agent's stderr.log (package stderrlog). A socket request carrying the
// credential is done as the agent (AgentOf; daemon/rpc_agent.go).
//
// Locks: the credential table's mutex and each launch's are leaves.
package launch

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/agentproc"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/sandbox"
	"github.com/warren-dev/warren/stderrlog"
)

// credentialPrefix starts every agent credential (so a leaked one is
// recognisable).
const credentialPrefix = "wac_"

// credStore maps live credentials (by hash) to their agents.
type credStore struct {
	mu sync.Mutex
	m  map[[32]byte]string
}

func newCredStore() *credStore { return &credStore{m: map[[32]byte]string{}} }

func credKey(secret string) [32]byte { return sha256.Sum256([]byte(secret)) }

// issue mints a credential for an agent.
func (s *credStore) issue(agentID string) (secret string, key [32]byte, err error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", key, fmt.Errorf("minting an agent credential: %w", err)
	}
	secret = credentialPrefix + hex.EncodeToString(b[:])
	key = credKey(secret)
	s.mu.Lock()
	s.m[key] = agentID
	s.mu.Unlock()
	return secret, key, nil
}

// agentOf returns the agent a live credential acts as.
func (s *credStore) agentOf(secret string) (string, bool) {
	if !strings.HasPrefix(secret, credentialPrefix) {
		return "", false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id, ok := s.m[credKey(secret)]
	return id, ok
}

func (s *credStore) revoke(key [32]byte) {
	s.mu.Lock()
	delete(s.m, key)
	s.mu.Unlock()
}

// Launches issues the credentials, records and stderr logs of the agent
// processes of one daemon.
type Launches struct {
	creds   *credStore
	records agentproc.Records
	stderr  *stderrlog.Logs
	log     hclog.Logger
}

// New returns the launches that record processes in records and keep
// their stderr in stderr.
func New(records agentproc.Records, stderr *stderrlog.Logs, log hclog.Logger) *Launches {
	return &Launches{creds: newCredStore(), records: records, stderr: stderr, log: log}
}

// For is the provider.Launcher of one agent's sessions; sb, when set,
// confines every process of the agent (nil: none).
func (l *Launches) For(agentID string, sb *Sandbox) provider.Launcher {
	return procLauncher{l: l, agentID: agentID, sb: sb}
}

// Sandbox is how an agent's processes are confined (package sandbox).
type Sandbox struct {
	// Bwrap is the bubblewrap binary.
	Bwrap string
	Spec  sandbox.Spec
	// Home is the agent's private home.
	Home string
	// OperatorHome is the daemon user's home: never bound as a runtime
	// prefix (sandbox.Runtime).
	OperatorHome string
	// ReadOnly lists warren's own files the processes need (the Python
	// helper library, the warren binary the MCP bridge runs).
	ReadOnly []string
	// Socket starts (or shares) the agent's own socket and returns its
	// path and the function that gives it back once the process ended.
	Socket func() (path string, release func(), err error)
	// GitDirs, for an agent with a workspace, finds its repository's
	// directories (sandbox.GitDirs) at each start, from the repository
	// the log names; nil for an agent without one.
	GitDirs func() (*sandbox.GitDirs, error)
}

// AgentOf returns the agent a live credential acts as; false when it is
// unknown or revoked.
func (l *Launches) AgentOf(credential string) (string, bool) { return l.creds.agentOf(credential) }

// procLauncher is the provider.Launcher of one agent's sessions.
type procLauncher struct {
	l       *Launches
	agentID string
	sb      *Sandbox
}

// StderrLog is the agent's stderr.log, for the output of its processes on
// a worker (provider.StderrLogger).
func (l procLauncher) StderrLog() (io.Writer, func()) {
	lg := l.l.stderr.Acquire(l.agentID)
	return lg, func() { l.l.stderr.Release(lg) }
}

func (l procLauncher) Prepare() (provider.Launch, error) {
	marker, err := agentproc.NewMarker()
	if err != nil {
		return nil, err
	}
	secret, key, err := l.l.creds.issue(l.agentID)
	if err != nil {
		return nil, err
	}
	p := &procLaunch{l: l.l, agentID: l.agentID, secret: secret, key: key, marker: marker, sb: l.sb}
	if l.sb != nil && l.sb.Socket != nil {
		if p.socket, p.release, err = l.sb.Socket(); err != nil {
			l.l.creds.revoke(key)
			return nil, fmt.Errorf("the agent's own socket: %w", err)
		}
	}
	p.stderr = l.l.stderr.Acquire(l.agentID)
	return p, nil
}

// procLaunch is the daemon's part in one agent process.
type procLaunch struct {
	l       *Launches
	agentID string
	secret  string
	key     [32]byte
	marker  string // agentproc.EnvMarker's value: proves a process is this launch's
	stderr  *stderrlog.Log
	sb      *Sandbox
	socket  string // the agent's own socket (sandboxed agents)
	release func() // gives the socket back (nil: none)

	mu    sync.Mutex
	rec   *agentproc.Record
	ended bool
}

// Env is the process's credential and its marker (agentproc.EnvMarker),
// which lets the next daemon tell it from an unrelated process.
func (p *procLaunch) Env() []string {
	return []string{provider.EnvCredential + "=" + p.secret, agentproc.EnvMarker + "=" + p.marker}
}

// Command is argv, or, for a sandboxed agent, argv confined in the
// sandbox: argv[0] looked up in env's PATH first (a missing one wraps
// exec.ErrNotFound, as an unconfined start would), and the program's
// runtime bound read-only (sandbox.Runtime). An agent with neither a
// workspace nor a cwd works in its private home.
func (p *procLaunch) Command(argv []string, dir string, env []string) ([]string, error) {
	if p.sb == nil || len(argv) == 0 {
		return argv, nil
	}
	path := envValue(env, "PATH")
	argv = append([]string(nil), argv...)
	if !strings.Contains(argv[0], "/") {
		lp, err := sandbox.LookPath(argv[0], path)
		if err != nil {
			return nil, err
		}
		argv[0] = lp
	}
	ro := append(append([]string(nil), p.sb.ReadOnly...), sandbox.Runtime(argv, path, p.sb.OperatorHome)...)
	work := dir
	if work == "" {
		work = p.sb.Home // an agent with neither workspace nor cwd works in its private home
	}
	v := sandbox.View{Work: work, Home: p.sb.Home, Socket: p.socket, ReadOnly: ro}
	if p.sb.GitDirs != nil {
		d, err := p.sb.GitDirs()
		if err != nil {
			return nil, fmt.Errorf("%w: the workspace's repository: %v", sandbox.ErrSandbox, err)
		}
		v.Git = d
	}
	return sandbox.Command(p.sb.Bwrap, p.sb.Spec, v, argv)
}

func envValue(env []string, name string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], name+"="); ok {
			return v
		}
	}
	return ""
}

// Stderr is the agent's stderr.log (package stderrlog), shared by its processes.
func (p *procLaunch) Stderr() io.Writer { return p.stderr }

// Started records the process durably before it gets any work.
func (p *procLaunch) Started(pid int) error {
	rec, err := agentproc.Describe(p.agentID, pid, p.marker)
	if err != nil {
		return err
	}
	if err := p.l.records.Add(rec); err != nil {
		return err
	}
	p.mu.Lock()
	p.rec = &rec
	p.mu.Unlock()
	p.l.log.Debug("agent process started", "agent", p.agentID, "pid", pid)
	return nil
}

// Ended revokes the credential and drops the record.
func (p *procLaunch) Ended() {
	p.l.creds.revoke(p.key)
	p.mu.Lock()
	rec := p.rec
	p.rec = nil
	first := !p.ended
	p.ended = true
	p.mu.Unlock()
	if first {
		p.l.stderr.Release(p.stderr)
		if p.release != nil {
			p.release()
		}
	}
	if rec != nil {
		if err := p.l.records.Remove(*rec); err != nil {
			p.l.log.Warn("removing an agent process record", "agent", p.agentID, "pid", rec.Pid, "err", err)
		}
	}
}

// KillLeftovers kills the process groups the previous run recorded
// that still run (their pid and start time match, or members of their
// group remain, and the process carries the record's marker: see
// agentproc.KillLeftover), and removes every record. A record that names a
// live process without its marker is refused and logged: nothing outside
// the daemon's own processes is killed, whatever the home holds. It runs at the start of
// recovery, before any turn can be re-run. A failure is logged: the
// daemon still starts.
func (l *Launches) KillLeftovers() {
	recs, bad, err := l.records.List()
	if err != nil {
		l.log.Error("cannot read the agent process records; processes of the previous run may still be running", "dir", l.records.Dir, "err", err)
		return
	}
	var names []string
	for _, b := range bad {
		l.log.Warn("ignoring an unreadable agent process record", "file", b.Name, "err", b.Err)
		names = append(names, b.Name)
	}
	for _, r := range recs {
		names = append(names, r.FileName())
		killed, what, err := agentproc.KillLeftover(r)
		switch {
		case errors.Is(err, agentproc.ErrNotOurs):
			l.log.Warn("refusing to kill the process an agent process record names: nothing proves this daemon started it (a forged record, or one an older warren wrote)",
				"file", r.FileName(), "agent", r.AgentID, "pid", r.Pid, "err", err)
		case err != nil:
			l.log.Error("cannot kill a leftover agent process", "agent", r.AgentID, "pid", r.Pid, "err", err)
		case killed:
			l.log.Warn("killed a leftover agent process group of the previous run", "agent", r.AgentID, "pid", r.Pid, "why", what)
		default:
			l.log.Debug("agent process record of the previous run: nothing to kill", "agent", r.AgentID, "pid", r.Pid, "why", what)
		}
	}
	if err := l.records.Clear(names); err != nil {
		l.log.Warn("removing agent process records", "err", err)
	}
}
