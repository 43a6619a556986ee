package registry

import (
	"sort"
	"sync"

	"github.com/warren-dev/warren/config"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/acp"
	"github.com/warren-dev/warren/provider/anthropic"
	"github.com/warren-dev/warren/provider/llm"
	"github.com/warren-dev/warren/provider/openai"
)

// HTTP provider entries (SPEC 7): the built-in openai, ollama and
// anthropic entries and every config entry of type openai or anthropic.
// One llm.Provider (with its own keep-alive pool) exists per entry name and
// type, made on first use; its settings are read from the current config
// for every request, so a reload applies to the next turn.

// httpDefaults are the settings of an entry before config.json.
func httpDefaults(name, typ string) llm.Settings {
	switch {
	case name == "ollama":
		return llm.Settings{BaseURL: openai.OllamaBaseURL, ContextBudget: 8000}
	case typ == "anthropic":
		st := llm.Settings{BaseURL: anthropic.DefaultBaseURL, ContextBudget: 150_000}
		if name == "anthropic" {
			st.APIKeyEnv = anthropic.DefaultKeyEnv
		}
		return st
	default:
		st := llm.Settings{BaseURL: openai.DefaultBaseURL, ContextBudget: 100_000}
		if name == "openai" {
			st.APIKeyEnv = openai.DefaultKeyEnv
		}
		return st
	}
}

// httpType returns the type of an HTTP entry, or "" when name is not one.
func httpType(cfg config.Config, name string) string {
	pc := cfg.Providers[name]
	switch t := pc.Type(name); t {
	case "openai", "anthropic":
		return t
	}
	return ""
}

// entrySettings is an HTTP entry's settings under cfg: the entry's own,
// and the daemon's limits on what a provider answers
// (limits.message_bytes) and on a turn's transcript
// (limits.turn_transcript_bytes).
func entrySettings(cfg config.Config, name, typ string) llm.Settings {
	st := httpDefaults(name, typ)
	lim := cfg.Limits.WithDefaults()
	st.MessageBytes, st.TurnBytes = lim.MessageBytes, lim.TurnTranscriptBytes
	pc, ok := cfg.Providers[name]
	if !ok {
		return st
	}
	if pc.BaseURL != "" {
		st.BaseURL = pc.BaseURL
	}
	if pc.APIKeyEnv != "" {
		st.APIKeyEnv = pc.APIKeyEnv
	}
	if m := pc.Model(); m != "" {
		st.Model = m
	}
	if n := pc.MaxTokens(); n > 0 {
		st.MaxTokens = n
	}
	if h := pc.Headers(); h != nil {
		st.Headers = h
	}
	if d := pc.Timeout(); d > 0 {
		st.Timeout = d
	}
	if n := pc.ContextBudget(); n > 0 {
		st.ContextBudget = n
	}
	return st
}

type httpKey struct{ name, typ string }

// httpRegistry holds the providers of HTTP entries.
type httpRegistry struct {
	mu    sync.Mutex
	provs map[httpKey]*llm.Provider
}

// httpProvider returns the provider of HTTP entry name, or nil when name
// is not an HTTP entry under the current config.
func (r *Registry) httpProvider(name string) provider.Provider {
	typ := httpType(r.opts.Config(), name)
	if typ == "" {
		return nil
	}
	k := httpKey{name, typ}
	r.http.mu.Lock()
	defer r.http.mu.Unlock()
	if p, ok := r.http.provs[k]; ok {
		return p
	}
	opts := llm.Options{Name: name, Getenv: r.opts.Getenv, Logger: r.opts.Logger,
		Settings: func() llm.Settings { return entrySettings(r.opts.Config(), name, typ) }}
	var p *llm.Provider
	if typ == "anthropic" {
		p = anthropic.New(opts)
	} else {
		p = openai.New(opts)
	}
	if r.http.provs == nil {
		r.http.provs = map[httpKey]*llm.Provider{}
	}
	r.http.provs[k] = p
	return p
}

// Info describes one provider entry (daemon.providers). It never holds a
// key: only whether the entry's key variable is set.
type Info struct {
	Name      string `json:"name"`
	Type      string `json:"type"`
	BaseURL   string `json:"base_url,omitempty"`
	Model     string `json:"model,omitempty"`
	KeyEnv    string `json:"api_key_env,omitempty"`
	KeySet    bool   `json:"key_set"`
	Budget    int    `json:"context_budget,omitempty"`
	MaxTokens int    `json:"max_tokens,omitempty"`
	TimeoutS  int    `json:"timeout_s,omitempty"`
	// acp entries.
	Command     []string `json:"command,omitempty"`
	Mode        string   `json:"mode,omitempty"`
	Permissions string   `json:"permissions,omitempty"`
}

func permissionsOrAsk(p string) string {
	if p == "" {
		return acp.PermAsk
	}
	return p
}

// Entries lists the provider entries: the registered providers and the
// HTTP and acp entries (built-in and from config.json), sorted by name.
func (r *Registry) Entries() []Info {
	cfg := r.opts.Config()
	getenv := r.opts.Getenv
	seen := map[string]bool{}
	var out []Info
	add := func(name string) {
		if seen[name] {
			return
		}
		seen[name] = true
		if typ := httpType(cfg, name); typ != "" {
			if _, registered := r.opts.Static[name]; !registered {
				st := entrySettings(cfg, name, typ)
				st2 := st
				if st2.Timeout <= 0 {
					st2.Timeout = llm.DefaultTimeout
				}
				out = append(out, Info{Name: name, Type: typ, BaseURL: st.BaseURL, Model: st.Model, KeyEnv: st.APIKeyEnv,
					KeySet: st.APIKeyEnv != "" && getenv(st.APIKeyEnv) != "", Budget: st.ContextBudget, MaxTokens: st.MaxTokens,
					TimeoutS: int(st2.Timeout.Seconds())})
				return
			}
		}
		if _, registered := r.opts.Static[name]; !registered && cfg.Providers[name].Type(name) == "acp" {
			st := acpSettings(cfg, name)
			out = append(out, Info{Name: name, Type: "acp", Model: cfg.Providers[name].Model(), Command: st.Command,
				Mode: st.Mode, Permissions: permissionsOrAsk(st.Permissions), TimeoutS: int(st.Timeout.Seconds())})
			return
		}
		if p, ok := r.opts.Static[name]; ok {
			typ := cfg.Providers[name].Type(name)
			if typ == "" {
				typ = p.Name()
			}
			out = append(out, Info{Name: name, Type: typ, Model: cfg.Providers[name].Model()})
		}
	}
	for name := range r.opts.Static {
		add(name)
	}
	for _, name := range []string{"openai", "ollama", "anthropic", "claude", "codex", "gemini", "opencode"} {
		add(name)
	}
	for name := range cfg.Providers {
		add(name)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
