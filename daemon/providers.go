package daemon

import (
	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/agentproc"
	"github.com/warren-dev/warren/config"
	"github.com/warren-dev/warren/demo"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/provider/scripted"
)

// DefaultProviders is the built-in registry: "scripted" (subprocess JSON
// lines) and "inproc" (the deterministic in-process provider with its
// built-in programs and the demo team's).
func DefaultProviders(cfg config.Config, logger hclog.Logger) map[string]provider.Provider {
	ip := inproc.New("inproc", inproc.Options{NativeResume: false, Logger: logger.Named("inproc")})
	for model, prog := range demo.Programs() {
		ip.Register(model, prog)
	}
	return map[string]provider.Provider{
		"scripted": scripted.New(scripted.Options{TurnTimeout: cfg.TurnTimeout, Logger: logger.Named("scripted"),
			Spawner: agentproc.NewSpawner()}),
		"inproc": ip,
	}
}

// checkRunChoice validates the provider and model a send asks for: an
// unknown provider, or a model the provider says it does not serve, is
// invalid input (code 2). The run would only fail, and a failed run changes
// nothing, so nothing is logged.
func (c *Core) checkRunChoice(a *agent, provName, model string) error {
	if provName == "" && model == "" {
		return nil
	}
	a.mu.Lock()
	pref := a.p.Provider
	a.mu.Unlock()
	name := provName
	if name == "" {
		name = pref
	}
	prov, err := c.provider(name)
	if err != nil {
		return err
	}
	if model == "" {
		return nil
	}
	if mc, ok := prov.(provider.ModelChecker); ok {
		if err := mc.CheckModel(model); err != nil {
			return failf(ErrInvalid, "--model %q: %w", model, err)
		}
	}
	return nil
}
