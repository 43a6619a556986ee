package config

import (
	"fmt"
	"path/filepath"
	"strings"
)

// sandboxKeys are the keys of a provider entry's "sandbox" object (SPEC 12).
var sandboxKeys = []string{"type", "network", "bind_ro", "bind_rw", "seed_home"}

// SandboxConfig is a provider entry's "sandbox": every agent of the entry
// runs confined with bubblewrap.
type SandboxConfig struct {
	// Network keeps the host's network (default true: agent CLIs reach
	// their model); false unshares it.
	Network bool
	// BindRO and BindRW are host paths added read-only and read-write.
	BindRO, BindRW []string
	// SeedHome lists files of the operator's home (relative paths) copied
	// into the agent's private home when it is created: an agent CLI's
	// login or settings.
	SeedHome []string
}

// Sandbox is entry name's sandbox (nil: the entry asks for none).
func (c Config) Sandbox(name string) *SandboxConfig {
	m, ok := c.Providers[name].Settings["sandbox"].(map[string]any)
	if !ok {
		return nil
	}
	sb := &SandboxConfig{Network: true, BindRO: strList(m["bind_ro"]), BindRW: strList(m["bind_rw"]), SeedHome: strList(m["seed_home"])}
	if n, ok := m["network"].(bool); ok {
		sb.Network = n
	}
	return sb
}

func strList(v any) []string {
	list, _ := v.([]any)
	var out []string
	for _, x := range list {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// checkSandbox validates an entry's "sandbox" object.
func checkSandbox(key string, settings map[string]any) error {
	v, ok := settings["sandbox"]
	if !ok {
		return nil
	}
	k := key + ".sandbox"
	m, isObj := v.(map[string]any)
	if !isObj {
		return fmt.Errorf("%w: %q must be an object such as {\"type\": \"bwrap\"}, got %v", ErrInvalid, k, v)
	}
	for name := range m {
		if !contains(sandboxKeys, name) {
			return fmt.Errorf("%w: unknown key %q%s; the keys of a sandbox are %s", ErrInvalid, k+"."+name, suggestKey(name, sandboxKeys), strings.Join(sandboxKeys, ", "))
		}
	}
	if m["type"] != "bwrap" {
		return fmt.Errorf("%w: %q must be \"bwrap\" (bubblewrap, the one sandbox warren runs), got %v", ErrInvalid, k+".type", m["type"])
	}
	if n, ok := m["network"]; ok {
		if _, isBool := n.(bool); !isBool {
			return fmt.Errorf("%w: %q must be true or false, got %v", ErrInvalid, k+".network", n)
		}
	}
	for _, name := range []string{"bind_ro", "bind_rw"} {
		if err := checkPaths(k+"."+name, m[name], true); err != nil {
			return err
		}
	}
	return checkPaths(k+".seed_home", m["seed_home"], false)
}

// checkPaths checks a list of paths: absolute ones (binds) or ones
// relative to the home without ".." (seed_home).
func checkPaths(key string, v any, absolute bool) error {
	if v == nil {
		return nil
	}
	list, isList := v.([]any)
	if !isList {
		return fmt.Errorf("%w: %q must be a list of paths", ErrInvalid, key)
	}
	for _, x := range list {
		p, isStr := x.(string)
		switch {
		case !isStr:
			return fmt.Errorf("%w: %q must be a list of paths, got %v in it", ErrInvalid, key, x)
		case absolute && (!filepath.IsAbs(p) || filepath.Clean(p) != p || p == "/"):
			return fmt.Errorf("%w: %q: %q must be an absolute, clean path other than /", ErrInvalid, key, p)
		case !absolute && (p == "" || filepath.IsAbs(p) || !filepath.IsLocal(p)):
			return fmt.Errorf("%w: %q: %q must be a path relative to your home, without \"..\"", ErrInvalid, key, p)
		}
	}
	return nil
}
