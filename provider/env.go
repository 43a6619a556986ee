package provider

import (
	"io"
	"strings"
)

// Environment variables the daemon sets for agent processes.
const (
	// EnvSocket is the daemon's socket path.
	EnvSocket = "WARREN_SOCKET"
	// EnvAgentID is the id of the agent the process serves.
	EnvAgentID = "WARREN_AGENT_ID"
	// EnvCredential is the process's agent credential: a socket request
	// carrying it as param "credential" is done as that agent.
	EnvCredential = "WARREN_AGENT_CREDENTIAL"
)

// DefaultEnvAllow is the documented default allow-list: the only variables
// of the daemon's own environment an agent process gets unless its provider
// entry passes more (env_pass). A name ending in '*' is a prefix.
var DefaultEnvAllow = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_*",
	"TERM", "TZ", "TMPDIR"}

// MatchEnv reports whether the variable name matches a pattern: an exact
// name, or a prefix followed by '*'.
func MatchEnv(pattern, name string) bool {
	if p, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(name, p)
	}
	return pattern == name
}

// PassEnv returns the entries of environ (KEY=VALUE) whose names match one
// of the patterns, in environ's order.
func PassEnv(environ, patterns []string) []string {
	var out []string
	for _, kv := range environ {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			continue
		}
		for _, p := range patterns {
			if MatchEnv(p, name) {
				out = append(out, kv)
				break
			}
		}
	}
	return out
}

// ProcessEnv is the whole environment of an agent process: the variables of
// environ (the daemon's) that DefaultEnvAllow lets through, then extra; a
// later entry for a name replaces an earlier one. Nothing else of environ
// reaches the process.
func ProcessEnv(environ, extra []string) []string {
	return MergeEnv(PassEnv(environ, DefaultEnvAllow), extra)
}

// MergeEnv concatenates environment lists, keeping one entry per name: the
// last one given, at the position of the first.
func MergeEnv(lists ...[]string) []string {
	idx := map[string]int{}
	var out []string
	for _, l := range lists {
		for _, kv := range l {
			name, _, _ := strings.Cut(kv, "=")
			if i, ok := idx[name]; ok {
				out[i] = kv
				continue
			}
			idx[name] = len(out)
			out = append(out, kv)
		}
	}
	return out
}

// Launcher lets the daemon take part in every process a provider starts for
// a session (Spec.Launcher). A provider that starts processes calls Prepare
// before each start, adds Launch.Env to the process's environment, calls
// Started once the process runs and before it is given any input, and
// Ended once it has been reaped (or when the start failed).
type Launcher interface {
	Prepare() (Launch, error)
}

// StderrLogger is a Launcher that also gives the agent's stderr log
// without starting a process: the remote provider keeps there what a
// worker's processes of the agent write to stderr. release gives it back.
type StderrLogger interface {
	StderrLog() (w io.Writer, release func())
}

// Launch is the daemon's part in one process.
type Launch interface {
	// Env is the environment only this process gets (its credential).
	Env() []string
	// Command is the command line that starts argv in dir with env: argv
	// itself, or argv confined in the agent's sandbox. An error wrapping
	// exec.ErrNotFound says argv[0] is missing.
	Command(argv []string, dir string, env []string) ([]string, error)
	// Started records the process (the leader of its own process group). An
	// error means it cannot be tracked: the provider kills it and fails.
	Started(pid int) error
	// Ended revokes the process's credential and drops its record. Called
	// once.
	Ended()
	// Stderr is where the provider copies what the process writes to its
	// stderr: the agent's capped <home>/agents/<id>/stderr.log, shared by
	// all its processes (nil: nowhere). Its Write never fails; it may be
	// written after Ended, while the pipe drains.
	Stderr() io.Writer
}
