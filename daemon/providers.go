package daemon

import (
	"github.com/hashicorp/go-hclog"

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
		"scripted": scripted.New(scripted.Options{TurnTimeout: cfg.TurnTimeout, Logger: logger.Named("scripted")}),
		"inproc":   ip,
	}
}
