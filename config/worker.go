package config

import (
	"fmt"
	"regexp"

	"github.com/warren-dev/warren/workspace"
)

// labelPattern is what a worker label's key and value may hold.
var labelPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// checkWorker validates an entry's "worker" setting: {"labels": {"k":
// "v", ...}, "remote": "URL"}, the labels a remote worker must carry to
// run the entry's sessions (provider/remote), and the agents' remote: a
// git repository the daemon and every worker can reach, through which
// an agent's workspace moves to the worker running its turn (package
// workspace). Without a remote, the sessions of agents with a workspace
// run on the daemon's machine.
func checkWorker(key string, settings map[string]any) error {
	v, ok := settings["worker"]
	if !ok {
		return nil
	}
	k := key + ".worker"
	m, isObj := v.(map[string]any)
	if !isObj {
		return fmt.Errorf("%w: %q must be an object such as {\"labels\": {\"gpu\": \"1\"}}, got %v", ErrInvalid, k, v)
	}
	for name := range m {
		if name != "labels" && name != "remote" {
			return fmt.Errorf("%w: unknown key %q; a worker setting has \"labels\" and \"remote\"", ErrInvalid, k+"."+name)
		}
	}
	if r, has := m["remote"]; has {
		s, isStr := r.(string)
		if !isStr {
			return fmt.Errorf("%w: %q must be a string, got %v", ErrInvalid, k+".remote", r)
		}
		if err := workspace.CheckRemote(s); err != nil {
			return fmt.Errorf("%w: %q: %v", ErrInvalid, k+".remote", err)
		}
	}
	if _, has := m["labels"]; !has {
		return nil
	}
	labels, isObj := m["labels"].(map[string]any)
	if !isObj {
		return fmt.Errorf("%w: %q must be an object of strings such as {\"gpu\": \"1\"}, got %v", ErrInvalid, k+".labels", m["labels"])
	}
	for lk, lv := range labels {
		s, isStr := lv.(string)
		if !labelPattern.MatchString(lk) || !isStr || !labelPattern.MatchString(s) {
			return fmt.Errorf("%w: %q: a label's key and value are 1-64 letters, digits, '_', '.' or '-', got %q: %v", ErrInvalid, k+".labels", lk, lv)
		}
	}
	return nil
}

// WorkerRemote is the agents' remote of entry name ("" when it has none:
// its agents' workspaces stay on the daemon's machine).
func (c Config) WorkerRemote(name string) string {
	w, _ := c.Providers[name].Settings["worker"].(map[string]any)
	r, _ := w["remote"].(string)
	return r
}

// WorkerLabels are the labels entry name's sessions need on a remote
// worker (nil: any worker serving the entry).
func (c Config) WorkerLabels(name string) map[string]string {
	w, _ := c.Providers[name].Settings["worker"].(map[string]any)
	labels, _ := w["labels"].(map[string]any)
	if len(labels) == 0 {
		return nil
	}
	out := make(map[string]string, len(labels))
	for k, v := range labels {
		out[k], _ = v.(string)
	}
	return out
}
