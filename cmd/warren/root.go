package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/warren-dev/warren/cmd/warren/internal/exit"
	"github.com/warren-dev/warren/cmd/warren/internal/reply"
	"github.com/warren-dev/warren/internal/suggest"
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
	)
	root.AddCommand(
		daemonCmd,
		agentCmd,
		newWaitsCmd(c),
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
  warren waits                            every pending wait in the tree, with its token id
  warren inbox                            drain the messages root agents sent to you
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
				return exit.Usagef(subcommandsLine(cmd), "no command given")
			}
			return unknownCommand(cmd, args[0])
		},
	}
	root.SetOut(c.stdout)
	root.SetErr(c.stderr)
	root.SetIn(c.stdin)
	root.SetVersionTemplate("warren {{.Version}}\n")
	root.PersistentFlags().StringVar(&c.homeFlag, "home", "", "home directory (default $WARREN_HOME, else ~/.warren)")
	root.PersistentFlags().BoolVar(&c.json, "json", false, "print the RPC result as JSON and nothing else")
	_ = root.MarkPersistentFlagDirname("home")
	root.SetFlagErrorFunc(flagError)
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
				return exit.Usagef(subcommandsLine(cmd), "%q needs a subcommand", name)
			}
			return unknownCommand(cmd, args[0])
		},
	}
}

// unknownCommand is the usage error for a mistyped command, with cobra's
// suggestions.
func unknownCommand(cmd *cobra.Command, typed string) error {
	msg := fmt.Sprintf("unknown command %q for %q", typed, cmd.CommandPath())
	if s := bestSuggestions(typed, cmd.SuggestionsFor(typed)); len(s) > 0 {
		msg += "; did you mean " + strings.Join(quoteAll(s), " or ") + "?"
	}
	return exit.Usagef(subcommandsLine(cmd), "%s", msg)
}

// subcommandsLine is "warren agent create|list|... [args] [flags]".
func subcommandsLine(cmd *cobra.Command) string {
	var names []string
	for _, s := range cmd.Commands() {
		if s.IsAvailableCommand() {
			names = append(names, s.Name())
		}
	}
	return cmd.CommandPath() + " " + strings.Join(names, "|") + " [args] [flags]"
}

// bestSuggestions keeps, of cobra's suggestions, the closest: the fewest
// edits, and among those one with the same letters (a transposition).
func bestSuggestions(typed string, cands []string) []string {
	if len(cands) < 2 {
		return cands
	}
	best, bestD := []string(nil), -1
	for _, c := range cands {
		d := suggest.Distance(strings.ToLower(typed), c)
		if sameLetters(typed, c) {
			d-- // a transposition counts as one edit, not two
		}
		switch {
		case bestD < 0 || d < bestD:
			best, bestD = []string{c}, d
		case d == bestD:
			best = append(best, c)
		}
	}
	return best
}

func sameLetters(a, b string) bool {
	ra, rb := []rune(strings.ToLower(a)), []rune(b)
	if len(ra) != len(rb) {
		return false
	}
	sort.Slice(ra, func(i, j int) bool { return ra[i] < ra[j] })
	sort.Slice(rb, func(i, j int) bool { return rb[i] < rb[j] })
	return string(ra) == string(rb)
}

func quoteAll(s []string) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = fmt.Sprintf("%q", x)
	}
	return out
}

var (
	unknownLong  = regexp.MustCompile(`^unknown flag: --([^ =]+)`)
	unknownShort = regexp.MustCompile(`^unknown shorthand flag: '.' in -([^ =]+)`)
)

// flagError turns pflag's errors into usage errors (exit 2), suggesting the
// flag that was probably meant.
func flagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	var names []string
	addNames := func(fs *pflag.FlagSet) {
		fs.VisitAll(func(f *pflag.Flag) {
			if !f.Hidden {
				names = append(names, f.Name)
			}
		})
	}
	addNames(cmd.Flags())
	addNames(cmd.InheritedFlags())
	if m := unknownLong.FindStringSubmatch(msg); m != nil {
		if s := suggest.Closest(m[1], names, 2); s != "" {
			msg += "; did you mean --" + s + "?"
		}
	} else if m := unknownShort.FindStringSubmatch(msg); m != nil {
		// -home: a long flag given with one dash.
		word := m[1]
		if s := suggest.Closest(word, names, 1); s != "" {
			msg += "; did you mean --" + s + "? (long flags take two dashes)"
		}
	}
	return exit.Usagef(cmd.UseLine(), "%s", msg)
}

// args checks the number of positional arguments (max < 0: no upper
// bound); a wrong number is a usage error naming what is missing or extra.
func args(min, max int, names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		switch {
		case len(a) < min:
			what := "an argument"
			if len(a) < len(names) {
				what = names[len(a)]
			}
			return exit.Usagef(cmd.UseLine(), "%s: missing %s", cmd.CommandPath(), what)
		case max >= 0 && len(a) > max:
			return exit.Usagef(cmd.UseLine(), "%s: unexpected argument %q", cmd.CommandPath(), a[max])
		}
		return nil
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
		Args:    args(0, 0),
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
				return unknownCommand(cmd, rest[0])
			}
			cmd.InitDefaultHelpFlag() // as COMMAND --help shows it
			cmd.InitDefaultVersionFlag()
			return cmd.Help()
		},
	}
}
