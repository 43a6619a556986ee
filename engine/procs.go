package engine

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/warren-dev/warren/agentproc"
	"github.com/warren-dev/warren/provider"
)

// Agent processes (docs/DECISIONS.md, "Agent processes: environment,
// credential, lifetime"). Every process a provider starts for an agent gets
// a fresh credential in WARREN_AGENT_CREDENTIAL, known only to this
// daemon's memory, and is recorded in <home>/procs before it gets any work;
// both go when it has been reaped. A socket request carrying the credential
// is done as the agent (agentauth.go).

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

// procLauncher is the provider.Launcher of one agent's sessions.
type procLauncher struct {
	c       *Core
	agentID string
}

func (l procLauncher) Prepare() (provider.Launch, error) {
	secret, key, err := l.c.creds.issue(l.agentID)
	if err != nil {
		return nil, err
	}
	return &procLaunch{c: l.c, agentID: l.agentID, secret: secret, key: key,
		stderr: l.c.stderrLogs.acquire(l.agentID)}, nil
}

// procLaunch is the daemon's part in one agent process.
type procLaunch struct {
	c       *Core
	agentID string
	secret  string
	key     [32]byte
	stderr  *stderrLog

	mu    sync.Mutex
	rec   *agentproc.Record
	ended bool
}

func (p *procLaunch) Env() []string { return []string{provider.EnvCredential + "=" + p.secret} }

// Stderr is the agent's stderr.log (stderrlog.go), shared by its processes.
func (p *procLaunch) Stderr() io.Writer { return p.stderr }

// Started records the process durably before it gets any work.
func (p *procLaunch) Started(pid int) error {
	rec, err := agentproc.Describe(p.agentID, pid)
	if err != nil {
		return err
	}
	if err := p.c.procRecords.Add(rec); err != nil {
		return err
	}
	p.mu.Lock()
	p.rec = &rec
	p.mu.Unlock()
	p.c.log.Debug("agent process started", "agent", p.agentID, "pid", pid)
	return nil
}

// Ended revokes the credential and drops the record.
func (p *procLaunch) Ended() {
	p.c.creds.revoke(p.key)
	p.mu.Lock()
	rec := p.rec
	p.rec = nil
	first := !p.ended
	p.ended = true
	p.mu.Unlock()
	if first {
		p.c.stderrLogs.release(p.stderr)
	}
	if rec != nil {
		if err := p.c.procRecords.Remove(*rec); err != nil {
			p.c.log.Warn("removing an agent process record", "agent", p.agentID, "pid", rec.Pid, "err", err)
		}
	}
}

// killLeftoverProcs kills the process groups the previous run recorded
// that still run (their pid and start time match, or members of their
// group remain), and removes every record. It runs at the start of
// recovery, before any turn can be re-run. A failure is logged: the
// daemon still starts.
func (c *Core) killLeftoverProcs() {
	recs, bad, err := c.procRecords.List()
	if err != nil {
		c.log.Error("cannot read the agent process records; processes of the previous run may still be running", "dir", c.procRecords.Dir, "err", err)
		return
	}
	var names []string
	for _, b := range bad {
		c.log.Warn("ignoring an unreadable agent process record", "file", b.Name, "err", b.Err)
		names = append(names, b.Name)
	}
	for _, r := range recs {
		names = append(names, r.FileName())
		killed, what, err := agentproc.KillLeftover(r)
		switch {
		case err != nil:
			c.log.Error("cannot kill a leftover agent process", "agent", r.AgentID, "pid", r.Pid, "err", err)
		case killed:
			c.log.Warn("killed a leftover agent process group of the previous run", "agent", r.AgentID, "pid", r.Pid, "why", what)
		default:
			c.log.Debug("agent process record of the previous run: nothing to kill", "agent", r.AgentID, "pid", r.Pid, "why", what)
		}
	}
	if err := c.procRecords.Clear(names); err != nil {
		c.log.Warn("removing agent process records", "err", err)
	}
}

// processEnv is the environment the daemon adds for an agent's processes
// on provider entry provName: the entry's env_pass variables of the
// daemon's environment and its fixed env, the daemon-wide extras, the
// helper library first on PYTHONPATH, WARREN_AGENT_ID and WARREN_SOCKET
// (the provider adds the default allow-list).
func (c *Core) processEnv(provName, agentID string) []string {
	pc := c.config().Providers[provName]
	environ := c.opts.Environ
	if environ == nil {
		environ = os.Environ()
	}
	fixed := make([]string, 0, len(pc.Env))
	for k, v := range pc.Env {
		fixed = append(fixed, k+"="+v)
	}
	sort.Strings(fixed)
	env := provider.MergeEnv(provider.PassEnv(environ, pc.EnvPass), fixed, c.opts.Env)
	if dir := c.opts.PythonPath; dir != "" {
		pp := dir
		for _, kv := range env {
			if old, ok := strings.CutPrefix(kv, "PYTHONPATH="); ok && old != "" {
				pp += string(filepath.ListSeparator) + old
			}
		}
		env = provider.MergeEnv(env, []string{"PYTHONPATH=" + pp})
	}
	own := []string{provider.EnvAgentID + "=" + agentID}
	if c.opts.SocketPath != "" {
		own = append(own, provider.EnvSocket+"="+c.opts.SocketPath)
	}
	return provider.MergeEnv(env, own)
}
