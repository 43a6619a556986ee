package main

import (
	"context"
	"errors"
	"strings"

	"github.com/spf13/cobra"

	"github.com/warren-dev/warren/cmd/warren/internal/agentinstall"
	"github.com/warren-dev/warren/cmd/warren/internal/exit"
	"github.com/warren-dev/warren/cmd/warren/internal/usage"
)

func newAgentsCmd(c *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agents",
		Short: "install the agent CLIs the built-in acp entries run",
		Args:  usage.Args(0, 0),
	}
	cmd.AddCommand(newAgentsInstallCmd(c))
	return cmd
}

func newAgentsInstallCmd(c *cli) *cobra.Command {
	names := strings.Join(agentinstall.Names(), ", ")
	cmd := &cobra.Command{
		Use:   "install NAME...",
		Short: "install pinned agent CLIs with npm into <home>/tools (" + names + ")",
		Long: `Install the agent CLI of each built-in acp entry NAME (` + names + `)
with npm, at the version warren was tested with, into <home>/tools. The
daemon looks there first; restart it (warren daemon stop; warren daemon
start) if it was running without them. Needs node and npm on PATH.

A sandboxed agent (an entry's "sandbox", or agent create --sandbox) does not
see your home: its CLI's own files (its login, its settings, its sessions)
live in the agent's private home, <home>/agents/<id>/home. Pass a key by
name with the entry's "env_pass", or copy your CLI's files into each new
private home with the sandbox's "seed_home", paths relative to your home:
  "claude": {"sandbox": {"type": "bwrap", "seed_home": [".claude.json", ".claude/settings.json"]}}`,
		Example:   indent("warren agents install claude codex\nwarren agent create lead --provider claude"),
		Args:      usage.Args(1, len(agentinstall.Names()), "NAME"),
		ValidArgs: agentinstall.Names(),
	}
	cmd.RunE = c.runE(func(ctx context.Context, cmd *cobra.Command, want []string) error {
		err := agentinstall.Install(ctx, c.home, want, c.stdout, c.stderr)
		if errors.Is(err, agentinstall.ErrUnknown) {
			return exit.Usagef(cmd.UseLine(), "%s", err)
		}
		return err
	})
	return cmd
}
