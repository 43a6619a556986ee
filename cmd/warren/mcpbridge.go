package main

import (
	"context"
	"github.com/warren-dev/warren/homedir"

	"github.com/spf13/cobra"

	"github.com/warren-dev/warren/cmd/warren/internal/usage"
	"github.com/warren-dev/warren/mcpbridge"
)

// newMCPBridgeCmd is `warren mcp-bridge`: the stdio MCP server an agent CLI
// starts (package mcpbridge has it all).
func newMCPBridgeCmd(c *cli) *cobra.Command {
	return &cobra.Command{
		Use:   "mcp-bridge",
		Short: "the stdio MCP server agent CLIs start: warren's tools for the agent's running turn (SPEC 7, acp)",
		Long: `warren mcp-bridge speaks MCP on stdin/stdout. Agent CLIs (type acp) start it
with WARREN_SOCKET and WARREN_AGENT_CREDENTIAL in its environment; each
tools/call runs as a tool call of that agent's running turn. You do not run
it by hand.`,
		Args: usage.Args(0, 0),
		RunE: c.runE(func(ctx context.Context, _ *cobra.Command, _ []string) error {
			return mcpbridge.Run(ctx, c.stdin, c.stdout, c.stderr, nil, homedir.SocketPath(c.home), version)
		}),
	}
}
