package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/warren-dev/warren/cmd/warren/internal/usage"
	"github.com/warren-dev/warren/homedir"
	"github.com/warren-dev/warren/mcpbridge"
	"github.com/warren-dev/warren/provider"
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
		// Not c.runE: with WARREN_SOCKET set the bridge needs no home, and
		// agent CLIs may start it with only the variables they were given
		// (no $HOME).
		RunE: func(cmd *cobra.Command, _ []string) error {
			sock, err := bridgeSocket(c.homeFlag, os.Getenv(provider.EnvSocket))
			if err != nil {
				return err
			}
			return mcpbridge.Run(cmd.Context(), c.stdin, c.stdout, c.stderr, nil, sock, version)
		},
	}
}

// bridgeSocket is the socket the bridge calls when WARREN_SOCKET is not
// set: the home's (--home, $WARREN_HOME, ~/.warren). With it set, it is
// "" (mcpbridge.Run takes the variable) and no home is looked for.
func bridgeSocket(homeFlag, envSocket string) (string, error) {
	if envSocket != "" {
		return "", nil
	}
	home, err := resolveHome(homeFlag)
	if err != nil {
		return "", fmt.Errorf("warren mcp-bridge: %w, or set %s to the daemon's socket", err, provider.EnvSocket)
	}
	return homedir.SocketPath(home), nil
}
