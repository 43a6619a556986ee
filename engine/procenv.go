package engine

import (
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/warren-dev/warren/provider"
)

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
