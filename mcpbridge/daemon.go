package mcpbridge

import (
	"context"
	"errors"
	"fmt"

	"github.com/warren-dev/warren/protocol"
	"github.com/warren-dev/warren/provider"
)

// Config says how the bridge reaches the daemon and as whom.
type Config struct {
	// Socket is the daemon's socket path.
	Socket string
	// Credential is the agent process's credential
	// (WARREN_AGENT_CREDENTIAL).
	Credential string
	// AgentID, when set, is sent as agent_id: the daemon refuses the call
	// unless the credential is that agent's.
	AgentID string
}

// ConfigFromEnv reads the Config from the environment variables the daemon
// gives an agent process (doc.go).
func ConfigFromEnv(getenv func(string) string) Config {
	return Config{Socket: getenv(provider.EnvSocket), Credential: getenv(provider.EnvCredential), AgentID: getenv(provider.EnvAgentID)}
}

// Daemon is the Caller that makes each call a socket tool.call with the
// agent's credential, on a fresh native connection (so a connection the
// daemon closed while idle, or a daemon restarted between calls, is never
// in the way).
type Daemon struct {
	cfg Config
}

// NewDaemon returns the Caller for cfg.
func NewDaemon(cfg Config) *Daemon { return &Daemon{cfg: cfg} }

// CallTool implements Caller.
func (d *Daemon) CallTool(ctx context.Context, tool string, args map[string]any) (map[string]any, error) {
	if d.cfg.Credential == "" {
		return nil, errorf(CodeUnreachable, "warren mcp-bridge has no agent credential: $%s is not set. The bridge must be "+
			"started by an agent process that warren launched (the acp provider passes it in the mcpServers entry)", provider.EnvCredential)
	}
	if d.cfg.Socket == "" {
		return nil, errorf(CodeUnreachable, "warren mcp-bridge does not know the daemon's socket: $%s is not set", provider.EnvSocket)
	}
	cl, err := protocol.Dial(ctx, d.cfg.Socket)
	if err != nil {
		return nil, &rpcError{Code: CodeUnreachable, Message: fmt.Sprintf("cannot reach the warren daemon: %v", err),
			Data: map[string]any{"socket": d.cfg.Socket, "outcome": "not_run"}}
	}
	defer cl.Close()
	params := map[string]any{"credential": d.cfg.Credential, "tool": tool, "arguments": args}
	if d.cfg.AgentID != "" {
		params["agent_id"] = d.cfg.AgentID
	}
	res, err := cl.Call(ctx, "tool.call", params)
	var pe *protocol.Error
	switch {
	case err == nil:
		return res, nil
	case errors.As(err, &pe):
		return nil, err
	case ctx.Err() != nil:
		return nil, ctx.Err()
	}
	return nil, &rpcError{Code: CodeUnreachable, Message: fmt.Sprintf("the connection to the warren daemon broke during the call of %s "+
		"(%v); the call may or may not have run: the agent's log says (warren logs)", tool, err),
		Data: map[string]any{"socket": d.cfg.Socket, "outcome": "unknown"}}
}
