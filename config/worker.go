package config

import (
	"fmt"
	"regexp"
)

// labelPattern is what a worker label's key and value may hold.
var labelPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// checkWorker validates an entry's "worker" setting: {"labels": {"k":
// "v", ...}}, the labels a remote worker must carry to run the entry's
// sessions (provider/remote).
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
		if name != "labels" {
			return fmt.Errorf("%w: unknown key %q; the one key of a worker setting is \"labels\"", ErrInvalid, k+"."+name)
		}
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
