// Package registry is the provider registry: it resolves a provider entry
// name to a provider.Provider. Three kinds of entry (SPEC 7, 10): the
// providers the binary registers (Options.Static: inproc with the demo
// programs, scripted; package builtins), the HTTP entries (openai, ollama,
// anthropic, and config entries of type openai or anthropic: http.go) and
// the acp entries (claude, codex, gemini, opencode, and config entries of
// type acp: acp.go). An HTTP or acp provider is made on first use, one per
// entry, and reads its settings from the current config on every request
// or process start, so a config reload applies to the next turn.
//
// Locks: the HTTP and acp tables each have a mutex, leaves held while an
// entry is looked up or made (never while a provider runs).
package registry

import (
	"os"
	"sort"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/config"
	"github.com/warren-dev/warren/provider"
)

// Options configure a Registry.
type Options struct {
	// Static are the providers registered by name (the binary's).
	Static map[string]provider.Provider
	// Config returns the config in force (required).
	Config func() config.Config
	// Getenv reads the daemon's environment (the HTTP entries' key
	// variables); nil: os.Getenv.
	Getenv func(string) string
	// WarrenBinary is the warren executable the acp agents' MCP bridge
	// runs; "": os.Executable().
	WarrenBinary string
	Logger       hclog.Logger
}

// Registry resolves provider entry names. Safe for concurrent use.
type Registry struct {
	opts Options
	http httpRegistry
	acp  acpRegistry
}

// New returns a registry.
func New(opts Options) *Registry {
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	return &Registry{opts: opts}
}

// Lookup returns the provider of entry name under the current config:
// a registered one first, then an HTTP entry, then an acp entry.
func (r *Registry) Lookup(name string) (provider.Provider, bool) {
	if p, ok := r.opts.Static[name]; ok {
		return p, true
	}
	if p := r.httpProvider(name); p != nil {
		return p, true
	}
	if p := r.acpProvider(name); p != nil {
		return p, true
	}
	return nil, false
}

// Names lists the entry names Entries shows, sorted.
func (r *Registry) Names() []string {
	es := r.Entries()
	names := make([]string, 0, len(es))
	for _, e := range es {
		names = append(names, e.Name)
	}
	sort.Strings(names)
	return names
}

// IsHTTP reports whether name is an HTTP entry under the current config.
func (r *Registry) IsHTTP(name string) bool { return httpType(r.opts.Config(), name) != "" }

// DefaultModel is the model of an entry that names none: the entry's
// "model" setting (config.json, or an HTTP entry's built-in settings).
func (r *Registry) DefaultModel(name string) string { return DefaultModel(r.opts.Config(), name) }

// DefaultModel is Registry.DefaultModel under cfg, for a caller that has
// read the config already (the engine reads it once per turn).
func DefaultModel(cfg config.Config, name string) string {
	if typ := httpType(cfg, name); typ != "" {
		return entrySettings(cfg, name, typ).Model
	}
	return cfg.Providers[name].Model()
}

// Env is what a daemon's registered providers (daemon.Options.Providers)
// are built from, once the daemon has loaded its config.
type Env struct {
	Config config.Config
	Logger hclog.Logger
	// PythonDir is the directory scripted agents import their helper
	// library from (on PYTHONPATH); a registry serving them installs it.
	PythonDir string
}
