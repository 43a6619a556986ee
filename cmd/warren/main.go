// Command warren is warren's single binary: the daemon (`warren daemon start
// --foreground`) and the thin client that talks to it over the Unix socket
// <home>/daemon.sock (SPEC sections 2 and 8).
//
// # Home
//
// Every command takes --home DIR; without it $WARREN_HOME is used, else
// ~/.warren.
//
// # Output and exit status
//
// --json on any command prints exactly the RPC result object as JSON and
// nothing else (streams print one JSON object per frame, one per line).
// Errors go to stderr as `error: <message>`. Exit status: 0 ok, 1 the daemon
// (or an offline operation) returned an error, 2 usage error, 3 daemon not
// running.
//
// # Choices the spec leaves open
//
//   - `warren events [REF]` and `warren events -f [REF]` behave the same: they
//     print events as the daemon logs them, from now until Ctrl-C. -f is
//     accepted for symmetry with `warren logs -f`. --since SEQ first prints
//     the logged events after SEQ (events.subscribe since_seq), then follows.
//     Use `warren logs REF` for an agent's history without the daemon.
//   - `warren logs` and `warren repair` never talk to the daemon: they read the
//     agent's log file, resolving REF from the agent.created entries on disk.
//   - `warren daemon stop` on a stopped daemon exits 3 like every other command
//     that needs the daemon.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// version is the version this binary reports (`warren version`, daemon.status).
const version = "0.1.0-dev"

// Exit codes (SPEC 8.2).
const (
	exitOK         = 0
	exitDaemonErr  = 1
	exitUsage      = 2
	exitNotRunning = 3
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// cli is one invocation: its streams and the flags common to all commands.
type cli struct {
	stdin    io.Reader
	stdout   io.Writer
	stderr   io.Writer
	home     string // resolved home directory
	homeFlag string // --home as given ("" when not given)
	json     bool
}

// exitError carries an exit status and the message printed for it.
type exitError struct {
	code  int
	msg   string
	usage string // usage line printed after a usage error
	err   error  // the cause, for errors.Is/As (may be nil)
}

func (e *exitError) Error() string { return e.msg }
func (e *exitError) Unwrap() error { return e.err }

func usageErr(usage, format string, args ...any) error {
	return &exitError{code: exitUsage, msg: fmt.Sprintf(format, args...), usage: usage}
}

// errSilent ends a command with exit status 1 when the command has already
// printed why.
var errSilent = errors.New("failed")

// command is one leaf command.
type command struct {
	usage string
	run   func(ctx context.Context, c *cli, args []string) error
}

func commands() map[string]command {
	return map[string]command{
		"daemon start":    {"warren daemon start [--foreground] [--max-slots N] [--log-level L] [--home DIR] [--json]", cmdDaemonStart},
		"daemon stop":     {"warren daemon stop [--home DIR] [--json]", cmdDaemonStop},
		"daemon status":   {"warren daemon status [--home DIR] [--json]", cmdDaemonStatus},
		"agent create":    {"warren agent create NAME [--instructions T] [--provider P] [--model M] [--parent REF] [--metadata k=v ...]", cmdAgentCreate},
		"agent list":      {"warren agent list [--wide] [--home DIR] [--json]", cmdAgentList},
		"providers":       {"warren providers [--home DIR] [--json]", cmdProviders},
		"agent tree":      {"warren agent tree [--home DIR] [--json]", cmdAgentTree},
		"agent inspect":   {"warren agent inspect REF [--since-seq N] [--limit N] [--home DIR] [--json]", cmdAgentInspect},
		"agent send":      {"warren agent send REF MESSAGE [--provider P] [--model M]", cmdAgentSend},
		"agent attach":    {"warren agent attach REF [--home DIR] [--json]", cmdAgentAttach},
		"agent terminate": {"warren agent terminate REF [--home DIR] [--json]", cmdAgentTerminate},
		"agent cancel":    {"warren agent cancel REF [--home DIR] [--json]", cmdAgentCancel},
		"agent reset":     {"warren agent reset REF [--home DIR] [--json]", cmdAgentReset},
		"agent resume":    {"warren agent resume REF [--token T | --token-id ID] [RESPONSE]", cmdAgentResume},
		"waits":           {"warren waits [--home DIR] [--json]", cmdWaits},
		"inbox":           {"warren inbox [--home DIR] [--json]", cmdInbox},
		"logs":            {"warren logs REF [-f] [--home DIR] [--json]", cmdLogs},
		"events":          {"warren events [-f] [--since SEQ] [--deltas] [REF] [--home DIR] [--json]", cmdEvents},
		"repair":          {"warren repair REF [--home DIR] [--json]", cmdRepair},
		"demo":            {"warren demo [--keep] [--home DIR]", cmdDemo},
		"mcp-bridge":      {"warren mcp-bridge [--home DIR]   (started by agent CLIs; speaks MCP on stdio)", cmdMCPBridge},
		"version":         {"warren version [--json]", cmdVersion},
		"help":            {"warren help", cmdHelp},
	}
}

const helpText = `warren: a durable multi-agent orchestration daemon and its client.

usage:
  warren daemon start [--foreground] [--max-slots N] [--log-level L]
  warren daemon stop | status
  warren agent create NAME [--instructions T] [--provider P] [--model M] [--parent REF] [--metadata k=v ...]
  warren agent list [--wide] | tree | inspect REF
  warren providers                        the provider entries: type, base URL, model, key set or not
  warren agent send REF MESSAGE [--provider P] [--model M]
  warren agent attach REF                 interactive, streaming
  warren agent terminate | cancel REF
  warren agent reset REF                  start the agent on a fresh context (the log keeps its history)
  warren agent resume REF [--token T | --token-id ID] [RESPONSE]
  warren waits                            every pending wait in the tree, with its token id
  warren inbox                            drain the messages root agents sent to you
  warren logs REF [-f]                    read an agent's log file (works while the daemon is down)
  warren events [-f] [--since SEQ] [REF]  live events from the daemon until Ctrl-C
  warren repair REF                       keep a copy of a corrupt log, cut it to its last good entry
  warren demo                             a team of agents, a crash, a recovery, end to end
  warren mcp-bridge                       the stdio MCP server agent CLIs start (warren's tools, SPEC 7)
  warren version | help

Every command takes --home DIR (default $WARREN_HOME, else ~/.warren) and
--json (print the RPC result as JSON and nothing else).
Exit status: 0 ok, 1 daemon error, 2 usage error, 3 daemon not running.
`

// run executes one invocation and returns its exit status.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := &cli{stdin: stdin, stdout: stdout, stderr: stderr}
	err := dispatch(ctx, c, args)
	if err == nil {
		return exitOK
	}
	var ee *exitError
	switch {
	case errors.Is(err, errSilent):
		return exitDaemonErr
	case errors.As(err, &ee) && ee.code == exitOK:
		fmt.Fprint(stdout, ee.msg) // help asked for
		return exitOK
	case errors.As(err, &ee):
		fmt.Fprintf(stderr, "error: %s\n", ee.msg)
		if ee.usage != "" {
			fmt.Fprintf(stderr, "usage: %s\n", ee.usage)
		}
		return ee.code
	default:
		fmt.Fprintf(stderr, "error: %s\n", err)
		return exitDaemonErr
	}
}

func dispatch(ctx context.Context, c *cli, args []string) error {
	// Global flags may come before the command: warren --home X agent list.
	var rest []string
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		if a := args[0]; a == "-h" || a == "-help" || a == "--help" {
			return &exitError{code: exitOK, msg: helpText}
		}
		n, err := c.globalFlag(args)
		if err != nil {
			return err
		}
		if n == 0 {
			return usageErr("warren [--home DIR] [--json] COMMAND ...", "unknown flag %s before the command", args[0])
		}
		args = args[n:]
	}
	rest = args
	if len(rest) == 0 {
		fmt.Fprint(c.stderr, helpText)
		return &exitError{code: exitUsage, msg: "no command given"}
	}
	cmds := commands()
	name := rest[0]
	if name == "daemon" || name == "agent" {
		if len(rest) < 2 || strings.HasPrefix(rest[1], "-") {
			return usageErr(groupUsage(name), "%q needs a subcommand", name)
		}
		name = rest[0] + " " + rest[1]
		rest = rest[2:]
		if _, ok := cmds[name]; !ok {
			return usageErr(groupUsage(rest0(args)), "unknown command %q", name)
		}
	} else {
		rest = rest[1:]
	}
	cmd, ok := cmds[name]
	if !ok {
		return usageErr("warren help", "unknown command %q", name)
	}
	return cmd.run(ctx, c, rest)
}

func rest0(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}

func groupUsage(group string) string {
	if group == "daemon" {
		return "warren daemon start|stop|status [flags]"
	}
	return "warren agent create|list|tree|inspect|send|attach|terminate|cancel|resume [args] [flags]"
}

// globalFlag consumes --home/--json given before the command; it returns how
// many arguments it used (0 when args[0] is not a global flag).
func (c *cli) globalFlag(args []string) (int, error) {
	a := args[0]
	switch {
	case a == "--json" || a == "-json":
		c.json = true
		return 1, nil
	case a == "--home" || a == "-home":
		if len(args) < 2 {
			return 0, usageErr("warren --home DIR COMMAND ...", "--home needs a directory")
		}
		c.homeFlag = args[1]
		return 2, nil
	case strings.HasPrefix(a, "--home=") || strings.HasPrefix(a, "-home="):
		c.homeFlag = a[strings.Index(a, "=")+1:]
		return 1, nil
	}
	return 0, nil
}

func cmdVersion(_ context.Context, c *cli, args []string) error {
	fs := newFlags(c, "version")
	if _, err := fs.parse(args, 0, 0); err != nil {
		return err
	}
	if c.json {
		return printJSON(c.stdout, map[string]any{"version": version})
	}
	fmt.Fprintf(c.stdout, "warren %s\n", version)
	return nil
}

func cmdHelp(_ context.Context, c *cli, _ []string) error {
	fmt.Fprint(c.stdout, helpText)
	return nil
}
