// Command warren is warren's single binary: the daemon (`warren daemon start
// --foreground`) and the thin client that talks to it over the Unix socket
// <home>/daemon.sock (SPEC sections 2 and 8).
//
// The command line is built with spf13/cobra and pflag (the library gh,
// kubectl and docker use): `--long` flags, `warren help CMD...` and `CMD
// --help` with examples, `warren completion bash|zsh|fish` with agent
// references completed from the daemon (or from disk when it is down),
// `--version`, and did-you-mean for mistyped commands and flags. Every
// command is registered in one place: register in root.go.
//
// # Layout
//
// This package is the command tree and its glue: each command's flags,
// help and the calls it makes. What the commands do lives in packages
// under cmd/warren/internal, one concept each, importable by this binary
// only: exit (exit statuses and the error carrying one), usage (usage
// errors with did-you-mean), client (the socket client and its errors),
// reply (reading replies, --json output), render (replies and log entries
// as text), offline (a home's logs without the daemon), events (warren
// events), notices (retries and waits shown by send and attach), attach,
// textarg (MESSAGE and RESPONSE), complete (shell completion), daemonctl
// (daemon start, stop, status), logcopy (export, migrate) and
// agentinstall (warren agents install).
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
// running (also when a stream ends because the daemon stopped), 130 when
// Ctrl-C interrupts `agent send` (the turn goes on in the daemon).
//
// # Choices the spec leaves open
//
//   - `warren events [REF]` prints the logged events (of REF, or of every
//     live agent in path order) and exits, as `warren logs` does, but through
//     the daemon (agent.log). `warren events -f` follows live events until
//     Ctrl-C; with --since SEQ it first replays the logged events after SEQ.
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
	"syscall"

	"github.com/warren-dev/warren/cmd/warren/internal/client"
	"github.com/warren-dev/warren/cmd/warren/internal/exit"
)

// version is the version this binary reports (`warren version`, daemon.status).
const version = "0.1.0-dev"

func main() {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sigs
		// A second Ctrl-C kills the process the default way. A second
		// SIGTERM is ignored: it is what a service manager or `warren
		// daemon stop`'s fallback sends, and must not turn a daemon's
		// graceful stop into a kill.
		signal.Reset(os.Interrupt)
		cancel(signalCause{s})
		for range sigs {
		}
	}()
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	os.Exit(code)
}

// signalCause is the cause of the context a signal cancelled.
type signalCause struct{ sig os.Signal }

func (s signalCause) Error() string { return "interrupted by " + s.sig.String() }

// signalExit is the exit status for a command interrupted by the signal
// that cancelled ctx (130 when there was none recorded: Ctrl-C).
func signalExit(ctx context.Context) int {
	var sc signalCause
	if errors.As(context.Cause(ctx), &sc) {
		if n, ok := sc.sig.(syscall.Signal); ok {
			return exit.Signal + int(n)
		}
	}
	return exit.Signal + int(syscall.SIGINT)
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

// daemon is the client of the home's daemon.
func (c *cli) daemon() *client.Client { return client.New(c.home, c.homeFlag != "") }

// run executes one invocation and returns its exit status.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := &cli{stdin: stdin, stdout: stdout, stderr: stderr}
	root := newRoot(c)
	if args == nil {
		args = []string{}
	}
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exit.OK
	}
	var ee *exit.Error
	switch {
	case errors.Is(err, exit.ErrSilent):
		return exit.DaemonErr
	case errors.As(err, &ee):
		if ee.Msg != "" {
			fmt.Fprintf(stderr, "error: %s\n", ee.Msg)
		}
		if ee.Code == exit.Usage {
			usage := ee.Usage
			if usage == "" && cmd != nil {
				usage = cmd.UseLine()
			}
			if usage != "" {
				fmt.Fprintf(stderr, "usage: %s\n", usage)
			}
			if cmd != nil {
				fmt.Fprintf(stderr, "run '%s --help' for more\n", cmd.CommandPath())
			}
		}
		return ee.Code
	default:
		fmt.Fprintf(stderr, "error: %s\n", err)
		return exit.DaemonErr
	}
}
