package config

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// BuiltinTypes maps each built-in provider entry to its type (SPEC 7).
var BuiltinTypes = map[string]string{
	"openai": "openai", "ollama": "openai", "anthropic": "anthropic",
	"claude": "acp", "codex": "acp", "gemini": "acp", "opencode": "acp",
	"scripted": "scripted", "inproc": "inproc",
}

// Types are the provider types an entry may name.
var Types = []string{"openai", "anthropic", "acp", "scripted", "inproc"}

// Limits of the typed provider settings.
const (
	MaxMaxTokens     = 1 << 24
	MaxTimeoutS      = 24 * 3600
	MinContextBudget = 1000
	MaxContextBudget = 100_000_000
)

// checkTyped validates the typed settings of an entry (type, model,
// max_tokens, headers, timeout_s, context_budget); they stay in Settings
// and are read through the accessors below.
func checkTyped(key, name string, settings map[string]any) error {
	if v, ok := settings["type"]; ok {
		s, isStr := v.(string)
		if !isStr || !contains(Types, s) {
			return fmt.Errorf("%w: %q must be one of %s, got %v", ErrInvalid, key+".type", strings.Join(Types, ", "), v)
		}
		if bt, builtin := BuiltinTypes[name]; builtin && bt != s {
			return fmt.Errorf("%w: %q: the built-in entry %q has type %q; use another name for an entry of type %q", ErrInvalid, key+".type", name, bt, s)
		}
	} else if _, builtin := BuiltinTypes[name]; !builtin {
		return fmt.Errorf("%w: %q needs a \"type\" (one of %s): it is not a built-in entry (built-in: openai, ollama, anthropic, claude, codex, gemini, opencode, scripted, inproc)",
			ErrInvalid, key, strings.Join(Types, ", "))
	}
	if v, ok := settings["model"]; ok {
		if _, isStr := v.(string); !isStr {
			return fmt.Errorf("%w: %q must be a model name (a string), got %v", ErrInvalid, key+".model", v)
		}
	}
	for _, k := range []struct {
		name     string
		min, max int64
	}{{"max_tokens", 1, MaxMaxTokens}, {"timeout_s", 1, MaxTimeoutS}, {"context_budget", MinContextBudget, MaxContextBudget}} {
		v, ok := settings[k.name]
		if !ok {
			continue
		}
		n, isNum := v.(json.Number)
		if !isNum {
			return fmt.Errorf("%w: %q must be a whole number from %d to %d, got %v", ErrInvalid, key+"."+k.name, k.min, k.max, v)
		}
		if _, err := intValue(key+"."+k.name, json.RawMessage(n.String()), k.min, k.max); err != nil {
			return err
		}
	}
	typ, _ := settings["type"].(string)
	if typ == "" {
		typ = BuiltinTypes[name]
	}
	if err := checkACP(key, name, typ, settings); err != nil {
		return err
	}
	if err := checkWorkspace(key, settings); err != nil {
		return err
	}
	if err := checkSandbox(key, settings); err != nil {
		return err
	}
	if err := checkWorker(key, settings); err != nil {
		return err
	}
	if err := checkBudgetSetting(key, settings); err != nil {
		return err
	}
	if v, ok := settings["headers"]; ok {
		m, isObj := v.(map[string]any)
		if !isObj {
			return fmt.Errorf("%w: %q must be an object of header names to string values", ErrInvalid, key+".headers")
		}
		for h, hv := range m {
			if _, isStr := hv.(string); !isStr || h == "" || strings.ContainsAny(h, " :\r\n") {
				return fmt.Errorf("%w: %q must be a string header value under a valid header name", ErrInvalid, key+".headers."+h)
			}
		}
	}
	return nil
}

// Type is the entry's type: its "type" setting, else the built-in type of
// its name, else "".
func (p ProviderConfig) Type(name string) string {
	if s, ok := p.Settings["type"].(string); ok {
		return s
	}
	return BuiltinTypes[name]
}

// Model is the entry's default model ("" when unset).
func (p ProviderConfig) Model() string {
	s, _ := p.Settings["model"].(string)
	return s
}

// Int reads a whole-number setting (0 when unset).
func (p ProviderConfig) Int(key string) int {
	n, ok := p.Settings[key].(json.Number)
	if !ok {
		return 0
	}
	if v, err := strconv.ParseInt(n.String(), 10, 64); err == nil {
		return int(v)
	}
	f, _ := n.Float64()
	return int(f)
}

// MaxTokens is the max_tokens setting (0: the type's default).
func (p ProviderConfig) MaxTokens() int { return p.Int("max_tokens") }

// Timeout is the timeout_s setting (0: the type's default).
func (p ProviderConfig) Timeout() time.Duration {
	return time.Duration(p.Int("timeout_s")) * time.Second
}

// ContextBudget is the context_budget setting (0: the entry's default).
func (p ProviderConfig) ContextBudget() int { return p.Int("context_budget") }

// Headers returns the extra request headers (a fresh map).
func (p ProviderConfig) Headers() map[string]string {
	m, _ := p.Settings["headers"].(map[string]any)
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}

// Permission policies of an acp entry.
var permissionPolicies = []string{"allow", "deny", "ask"}

// checkACP validates the settings of an acp entry: command (an argv list,
// required unless the name is built in), mode, permissions. They are
// refused on entries of other types.
func checkACP(key, name, typ string, settings map[string]any) error {
	if typ != "acp" {
		for _, k := range []string{"command", "mode", "permissions"} {
			if _, ok := settings[k]; ok {
				return fmt.Errorf("%w: %q is a setting of acp entries; this entry has type %q", ErrInvalid, key+"."+k, typ)
			}
		}
		return nil
	}
	v, ok := settings["command"]
	if !ok {
		if _, builtin := BuiltinTypes[name]; !builtin {
			return fmt.Errorf("%w: %q needs a \"command\": the agent's argv as a list, e.g. [\"claude-agent-acp\"]", ErrInvalid, key)
		}
	} else {
		list, isList := v.([]any)
		if !isList || len(list) == 0 {
			return fmt.Errorf("%w: %q must be a non-empty list of strings (the agent's argv), got %v", ErrInvalid, key+".command", v)
		}
		for i, a := range list {
			s, isStr := a.(string)
			switch {
			case !isStr || (i == 0 && s == ""):
				return fmt.Errorf("%w: %s[%d] must be a string (the program first), got %v", ErrInvalid, key+".command", i, a)
			case looksSecret(s) || looksSecret(afterEquals(s)):
				return fmt.Errorf("%w: %s[%d] looks like a literal credential; config.json must never hold keys: pass it from the daemon's environment with %q", ErrInvalid, key+".command", i, key+".env_pass")
			}
		}
	}
	if v, ok := settings["mode"]; ok {
		if s, isStr := v.(string); !isStr || s == "" {
			return fmt.Errorf("%w: %q must be the id of a session mode the agent offers (a string), got %v", ErrInvalid, key+".mode", v)
		}
	}
	if v, ok := settings["permissions"]; ok {
		if s, isStr := v.(string); !isStr || !contains(permissionPolicies, s) {
			return fmt.Errorf("%w: %q must be one of allow, deny, ask, got %v", ErrInvalid, key+".permissions", v)
		}
	}
	return nil
}

func afterEquals(s string) string {
	if _, v, ok := strings.Cut(s, "="); ok {
		return v
	}
	return ""
}

// Command is an acp entry's argv (nil when unset).
func (p ProviderConfig) Command() []string {
	list, _ := p.Settings["command"].([]any)
	if len(list) == 0 {
		return nil
	}
	out := make([]string, 0, len(list))
	for _, a := range list {
		s, _ := a.(string)
		out = append(out, s)
	}
	return out
}

// Mode is an acp entry's session mode ("" when unset).
func (p ProviderConfig) Mode() string {
	s, _ := p.Settings["mode"].(string)
	return s
}

// Permissions is an acp entry's permission policy ("" when unset: ask).
func (p ProviderConfig) Permissions() string {
	s, _ := p.Settings["permissions"].(string)
	return s
}

// checkWorkspace validates an entry's "workspace" and "copy" settings.
func checkWorkspace(key string, settings map[string]any) error {
	if v, ok := settings["workspace"]; ok && v != "worktree" && v != "none" {
		return fmt.Errorf("%w: %q must be \"worktree\" (every agent of the entry gets a workspace) or \"none\", got %v", ErrInvalid, key+".workspace", v)
	}
	if v, ok := settings["copy"]; ok {
		list, isList := v.([]any)
		for _, x := range list {
			if _, isStr := x.(string); !isStr {
				isList = false
			}
		}
		if !isList {
			return fmt.Errorf("%w: %q must be a list of paths relative to the repository (ignored files a new worktree gets a copy of)", ErrInvalid, key+".copy")
		}
	}
	return nil
}
