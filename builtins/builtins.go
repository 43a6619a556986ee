// Package builtins is the registry of the providers the warren binary
// serves besides the config-driven HTTP and acp entries: "scripted"
// (subprocess JSON lines) and "inproc" (the deterministic in-process
// provider with its built-in programs and the demo team's). The binary
// (cmd/warren) hands Providers to daemon.Run, so the daemon does not
// depend on the concrete providers or on the demo.
package builtins

import (
	"fmt"

	"github.com/warren-dev/warren/agentproc"
	"github.com/warren-dev/warren/demo"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/provider/scripted"
	"github.com/warren-dev/warren/registry"
)

// DefaultProvider is the provider of an agent.create that names none.
const DefaultProvider = "inproc"

// Providers builds the built-in registry for a daemon's config and
// installs the scripted agents' helper library (warren_script) in
// env.PythonDir.
func Providers(env registry.Env) (map[string]provider.Provider, error) {
	if env.PythonDir != "" {
		if err := scripted.WriteHelpers(env.PythonDir); err != nil {
			return nil, fmt.Errorf("installing the scripted helper library in %s: %w", env.PythonDir, err)
		}
	}
	ip := inproc.New("inproc", inproc.Options{NativeResume: false, Logger: env.Logger.Named("inproc")})
	for model, prog := range demo.Programs() {
		ip.Register(model, prog)
	}
	return map[string]provider.Provider{
		"scripted": scripted.New(scripted.Options{TurnTimeout: env.Config.TurnTimeout, Logger: env.Logger.Named("scripted"),
			Spawner: agentproc.NewSpawner()}),
		"inproc": ip,
	}, nil
}
