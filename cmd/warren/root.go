package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/warren-dev/warren/cmd/warren/internal/exit"
	"github.com/warren-dev/warren/cmd/warren/internal/reply"
	"github.com/warren-dev/warren/cmd/warren/internal/usage"
)

// register adds every command to the tree. A new command is one line here;
// its constructor takes the invocation and returns the command.
func register(root, daemonCmd, agentCmd *cobra.Command, c *cli) {
	daemonCmd.AddCommand(
		newDaemonStartCmd(c),
		newDaemonStopCmd(c),
		newDaemonStatusCmd(c),
	)
	agentCmd.AddCommand(
		newAgentCreateCmd(c),
		newAgentListCmd(c),
		newAgentTreeCmd(c),
		newAgentInspectCmd(c),
		newAgentSendCmd(c),
		newAgentAttachCmd(c),
		newAgentTerminateCmd(c),
		newAgentCancelCmd(c),
		newAgentResetCmd(c),
		newAgentResumeCmd(c),
		newAgentBudgetCmd(c),
	)
	workspaceCmd := group("workspace", "agents' git worktrees: snapshots, diffs, restores, merges",
		"warren workspace log lead/w1\nwarren workspace diff lead/w1 --turn 2\nwarren workspace merge lead/w1")
	workspaceCmd.AddCommand(newWorkspaceCmds(c)...)
	root.AddCommand(
		daemonCmd,
		agentCmd,
		workspaceCmd,
		newWaitsCmd(c),
		newNotifyCmd(c),
		newConsoleCmd(c),
		newTopCmd(c),
		newProvidersCmd(c),
		newInboxCmd(c),
		newLogsCmd(c),
		newEventsCmd(c),
		newRepairCmd(c),
		newExportCmd(c),
		newMigrateCmd(c),
		newDemoCmd(c),
		newMCPBridgeCmd(c),
		newAgentsCmd(c),
		newWorkerCmd(c),
		newVersionCmd(c),
	)
}

const rootLong = `warren: a durable multi-agent orchestration daemon and its client.

  warren daemon start [--foreground] [--max-slots N] [--log-level L]
  warren daemon stop | status
  warren agent create NAME [--instructions T] [--provider P] [--model M] [--parent REF] [--metadata k=v ...]
  warren agent list [--all] [--status S] [--wide] | tree | inspect REF
  warren providers                        the provider entries: type, base URL, model, key set or not
  warren agent send REF MESSAGE|- [--file PATH] [--provider P] [--model M]
  warren agent attach REF                 interactive, streaming
  warren agent terminate [--recursive] | cancel REF
  warren agent reset REF                  start the agent on a fresh context (the log keeps its history)
  warren agent resume REF [--token T | --token-id ID] [RESPONSE|-]
  warren agent budget REF [--tokens N] [--usd X] [--turns N] [--add]   a subtree's budget
  warren waits                            every pending wait in the tree, with its token id
  warren notify test | log                notifications (config.json "notify"): send a sample, what was delivered
  warren console [--revoke]               pair a browser (or a phone, by QR code) with the web console
  warren top                              a live view of the team; keys answer waits, resume, cancel, follow
  warren inbox                            drain the messages root agents sent to you
  warren worker --join URL --pools P=N    run agent sessions for a cluster's daemon on this machine
  warren logs REF [-f]                    read an agent's log file (works while the daemon is down)
  warren events [-f] [--since SEQ] [REF]  logged events through the daemon; -f follows live ones until Ctrl-C
  warren repair REF                       keep a copy of a corrupt log, cut it to its last good entry
  warren demo                             a team of agents, a crash, a recovery, end to end
  warren mcp-bridge                       the stdio MCP server agent CLIs start (warren's tools, SPEC 7)
  warren agents install NAME...           install pinned agent CLIs (claude, codex, gemini, opencode) into <home>/tools
  warren completion bash|zsh|fish         a shell completion script
  warren version | help [COMMAND...]

Every command takes --home DIR (default $WARREN_HOME, else ~/.warren) and
--json (print the RPC result as JSON and nothing else).
Exit status: 0 ok, 1 daemon error, 2 usage error, 3 daemon not running.`

// newRoot builds the command tree of one invocation.
func newRoot(c *cli) *cobra.Command {
	root := &cobra.Command{
		Use:           "warren",
		Short:         "a durable multi-agent orchestration daemon and its client",
		Long:          rootLong,
		Version:       version,
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				cmd.SetOut(c.stderr)
				_ = cmd.Help()
				return exit.Usagef(usage.Subcommands(cmd), "no command given")
			}
			return usage.UnknownCommand(cmd, args[0])
		},
	}
	root.SetOut(c.stdout)
	root.SetErr(c.stderr)
	root.SetIn(c.stdin)
	root.SetVersionTemplate("warren {{.Version}}\n")
	root.PersistentFlags().StringVar(&c.homeFlag, "home", "", "home directory (default $WARREN_HOME, else ~/.warren)")
	root.PersistentFlags().BoolVar(&c.json, "json", false, "print the RPC result as JSON and nothing else")
	_ = root.MarkPersistentFlagDirname("home")
	root.SetFlagErrorFunc(usage.FlagError)
	root.SuggestionsMinimumDistance = 2

	daemonCmd := group("daemon", "start, stop and look at the daemon", "warren daemon start\nwarren daemon status\nwarren daemon stop")
	agentCmd := group("agent", "create agents, talk to them, look at them, end them",
		"warren agent create lead --provider inproc --model echo\nwarren agent send lead 'plan the release'\nwarren agent ls --wide")
	register(root, daemonCmd, agentCmd, c)
	root.SetHelpCommand(newHelpCmd(root))
	// cobra's completion command (bash, zsh, fish, powershell), made now
	// so that an unknown shell is a usage error like any unknown command.
	root.InitDefaultCompletionCmd()
	if comp, _, err := root.Find([]string{"completion"}); err == nil && comp != root {
		comp.Short = "print a shell completion script (agent references complete from the daemon, or from disk)"
		comp.Example = indent(`source <(warren completion bash)
warren completion zsh > "${fpath[1]}/_warren"
warren completion fish > ~/.config/fish/completions/warren.fish`)
		comp.Args = cobra.ArbitraryArgs
		comp.RunE = group("completion", "", "").RunE
	}
	return root
}

// group is a command that only holds subcommands: without one, or with an
// unknown one, it is a usage error (with suggestions), never help and exit 0.
func group(name, short, example string) *cobra.Command {
	return &cobra.Command{
		Use:                        name + " COMMAND",
		Short:                      short,
		Example:                    indent(example),
		Args:                       cobra.ArbitraryArgs,
		SuggestionsMinimumDistance: 2,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return exit.Usagef(usage.Subcommands(cmd), "%q needs a subcommand", name)
			}
			return usage.UnknownCommand(cmd, args[0])
		},
	}
}

// runE wraps a command body: it resolves the home first.
func (c *cli) runE(fn func(ctx context.Context, cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, a []string) error {
		home, err := resolveHome(c.homeFlag)
		if err != nil {
			return err
		}
		c.home = home
		return fn(cmd.Context(), cmd, a)
	}
}

// indent indents example lines as cobra's help shows them.
func indent(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i, l := range lines {
		lines[i] = "  " + l
	}
	return strings.Join(lines, "\n")
}

// resolveHome applies SPEC 2: --home, else $WARREN_HOME, else ~/.warren.
func resolveHome(flagValue string) (string, error) {
	h := flagValue
	if h == "" {
		h = os.Getenv("WARREN_HOME")
	}
	if h == "" {
		user, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("cannot find the home directory (%w); pass --home DIR or set WARREN_HOME", err)
		}
		h = filepath.Join(user, ".warren")
	}
	abs, err := filepath.Abs(h)
	if err != nil {
		return "", fmt.Errorf("home %q: %w", h, err)
	}
	return abs, nil
}

// kvFlag collects repeated k=v values (a pflag.Value).
type kvFlag map[string]string

func (m kvFlag) String() string {
	parts := make([]string, 0, len(m))
	for k, v := range m {
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, ",")
}

func (m kvFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("metadata %q is not key=value", s)
	}
	m[k] = v
	return nil
}

func (m kvFlag) Type() string { return "key=value" }

func newVersionCmd(c *cli) *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "print the version of this binary",
		Example: indent("warren version\nwarren --version\nwarren version --json"),
		Args:    usage.Args(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if c.json {
				return reply.JSON(c.stdout, map[string]any{"version": version})
			}
			fmt.Fprintf(c.stdout, "warren %s\n", version)
			return nil
		},
	}
}

// newHelpCmd is `warren help [COMMAND...]`: that command's help, the same
// text as COMMAND --help; an unknown topic is a usage error with
// suggestions (cobra's own help prints the top-level help and exits 0).
func newHelpCmd(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:     "help [COMMAND...]",
		Short:   "help about any command (the same as COMMAND --help)",
		Example: indent("warren help agent send\nwarren agent send --help"),
		ValidArgsFunction: func(_ *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			cmd, _, err := root.Find(args)
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var out []cobra.Completion
			for _, s := range cmd.Commands() {
				if s.IsAvailableCommand() && strings.HasPrefix(s.Name(), toComplete) {
					out = append(out, cobra.CompletionWithDesc(s.Name(), s.Short))
				}
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(_ *cobra.Command, args []string) error {
			cmd, rest, err := root.Find(args)
			if err != nil {
				return exit.Usagef("warren help [COMMAND...]", "%v", err)
			}
			if len(rest) > 0 {
				return usage.UnknownCommand(cmd, rest[0])
			}
			cmd.InitDefaultHelpFlag() // as COMMAND --help shows it
			cmd.InitDefaultVersionFlag()
			return cmd.Help()
		},
	}
}
