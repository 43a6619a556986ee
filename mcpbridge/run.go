package mcpbridge

import (
	"context"
	"io"
	"os"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/provider"
)

// EnvLogLevel sets the level of the bridge's log on stderr (default warn).
const EnvLogLevel = "WARREN_MCP_LOG_LEVEL"

// Run is `warren mcp-bridge`: it serves MCP on in and out, calling the
// daemon with the Config of the environment (defaultSocket when
// WARREN_SOCKET is not set), and logs to stderr. It returns when in ends.
func Run(ctx context.Context, in io.Reader, out, stderr io.Writer, getenv func(string) string, defaultSocket, version string) error {
	if getenv == nil {
		getenv = os.Getenv
	}
	cfg := ConfigFromEnv(getenv)
	if cfg.Socket == "" {
		cfg.Socket = defaultSocket
	}
	level := hclog.LevelFromString(getenv(EnvLogLevel))
	if level == hclog.NoLevel {
		level = hclog.Warn
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "warren-mcp-bridge", Level: level, Output: stderr})
	if cfg.Credential == "" {
		log.Warn("no agent credential in the environment: tools/call will be refused; the bridge is meant to be started by an agent process warren launched",
			"variable", provider.EnvCredential)
	}
	return Serve(ctx, in, out, Options{Caller: NewDaemon(cfg), Logger: log, Version: version})
}
