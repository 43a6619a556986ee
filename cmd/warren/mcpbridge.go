package main

import (
	"context"

	"github.com/warren-dev/warren/daemon"
	"github.com/warren-dev/warren/mcpbridge"
)

// cmdMCPBridge is `warren mcp-bridge`: the stdio MCP server an agent CLI
// starts (package mcpbridge has it all).
func cmdMCPBridge(ctx context.Context, c *cli, args []string) error {
	f := newFlags(c, "mcp-bridge")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	return mcpbridge.Run(ctx, c.stdin, c.stdout, c.stderr, nil, daemon.SocketPath(c.home), version)
}
