package registry

import (
	"os"
	"sync"

	"github.com/warren-dev/warren/agentproc"
	"github.com/warren-dev/warren/config"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/acp"
)

// ACP provider entries (SPEC 7): the built-in claude, codex, gemini and
// opencode entries and every config entry of type acp. One acp.Provider
// exists per entry name, made on first use; its settings are read from the
// current config for every process start and turn.

// acpDefaults are a built-in entry's settings before config.json: the
// adapter's command, the variables it needs, its keys' variables, and the
// mode that neither calls the model to approve tools nor needs a TTY
// (reference/providers.md 6.2).
func acpDefaults(name string) acp.Settings {
	switch name {
	case "claude":
		st := acp.Settings{Command: []string{"claude-agent-acp"}, Mode: "default",
			InstallHint: "warren agents install claude, then restart the daemon (or npm install -g @agentclientprotocol/claude-agent-acp@0.101.0 on the daemon's PATH)",
			EnvPass:     []string{"ANTHROPIC_*", "CLAUDE_*"},
			Env:         []string{"CLAUDE_CODE_MAX_RETRIES=0", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"}}
		if os.Geteuid() == 0 {
			// The adapter refuses its permission modes to root unless told
			// it runs in a sandbox.
			st.Env = append(st.Env, "IS_SANDBOX=1")
		}
		return st
	case "codex":
		return acp.Settings{Command: []string{"codex-acp"}, Mode: "workspace-write", EnvPass: []string{"OPENAI_*", "CODEX_*"},
			InstallHint: "warren agents install codex, then restart the daemon (or npm install -g @agentclientprotocol/codex-acp@2.6.0 on the daemon's PATH)"}
	case "gemini":
		return acp.Settings{Command: []string{"gemini", "--acp", "--skip-trust"}, ModelFlag: "-m",
			InstallHint: "warren agents install gemini, then restart the daemon (or npm install -g @google/gemini-cli@0.61.0 on the daemon's PATH)",
			EnvPass:     []string{"GEMINI_*", "GOOGLE_*"}}
	case "opencode":
		return acp.Settings{Command: []string{"opencode", "acp"}, InstallHint: "warren agents install opencode, then restart the daemon (or npm install -g opencode-ai@1.18.33 on the daemon's PATH)",
			EnvPass: []string{"OPENCODE_*", "OPENAI_*", "ANTHROPIC_*"},
			Env:     []string{"OPENCODE_DISABLE_AUTOUPDATE=1"}}
	}
	return acp.Settings{}
}

// acpSettings is an acp entry's settings under cfg.
func acpSettings(cfg config.Config, name string) acp.Settings {
	st := acpDefaults(name)
	pc := cfg.Providers[name]
	if cmd := pc.Command(); cmd != nil {
		st.Command, st.InstallHint = cmd, ""
	}
	if m := pc.Mode(); m != "" {
		st.Mode = m
	}
	st.Permissions = pc.Permissions()
	st.Timeout = pc.Timeout()
	st.MaxText = cfg.Limits.WithDefaults().MessageBytes
	return st
}

// acpRegistry holds the providers of acp entries.
type acpRegistry struct {
	mu      sync.Mutex
	provs   map[string]*acp.Provider
	spawner *agentproc.Spawner
}

// acpProvider returns the provider of acp entry name, or nil when name is
// not an acp entry under the current config.
func (r *Registry) acpProvider(name string) provider.Provider {
	cfg := r.opts.Config()
	if cfg.Providers[name].Type(name) != "acp" {
		return nil
	}
	r.acp.mu.Lock()
	defer r.acp.mu.Unlock()
	if p, ok := r.acp.provs[name]; ok {
		return p
	}
	bin := r.opts.WarrenBinary
	if bin == "" {
		bin, _ = os.Executable()
	}
	if r.acp.spawner == nil {
		r.acp.spawner = agentproc.NewSpawner()
		r.acp.provs = map[string]*acp.Provider{}
	}
	p := acp.New(acp.Options{Name: name, WarrenBinary: bin, Logger: r.opts.Logger, Spawner: r.acp.spawner,
		Settings: func() acp.Settings { return acpSettings(r.opts.Config(), name) }})
	r.acp.provs[name] = p
	return p
}
