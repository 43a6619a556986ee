package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/warren-dev/warren/builtins"
	"github.com/warren-dev/warren/cmd/warren/internal/agentinstall"
	"github.com/warren-dev/warren/cmd/warren/internal/daemonctl"
	"github.com/warren-dev/warren/cmd/warren/internal/exit"
	"github.com/warren-dev/warren/cmd/warren/internal/usage"
	"github.com/warren-dev/warren/daemon"
)

func newDaemonStartCmd(c *cli) *cobra.Command {
	var fg bool
	var maxSlots int
	var level, httpAddr string
	var cl daemon.ClusterOptions
	cmd := &cobra.Command{
		Use:   "start [--foreground] [--max-slots N] [--log-level L] [--http ADDR] [--cluster nats://... | --cluster-embedded [--routes nats://...]]",
		Short: "start the daemon (in the background unless --foreground)",
		Long: `Start the daemon of the home. In the background (the default) it waits until
the daemon serves, printing progress while recovery runs, and shows the last
lines of daemon.log if it fails. --max-slots wins over config.json's default
pool.

With --cluster the agents' logs and session snapshots live in the NATS
JetStream cluster at the URL instead of the home (the server must fsync
every write; --unsafe-lazy-fsync accepts one that cannot be confirmed to).
--cluster-embedded runs a NATS server inside the daemon, its data under
<home>/nats; --routes names the other servers' cluster addresses, so that
three daemons form a cluster with no other software. Without these flags
nothing of NATS runs.`,
		Example: indent("warren daemon start\nwarren daemon start --max-slots 8 --log-level debug\nwarren daemon start --foreground --home /tmp/team\nwarren daemon start --cluster nats://10.0.0.5:4222\nwarren daemon start --cluster-embedded --node n1 --routes nats://10.0.0.6:6222,nats://10.0.0.7:6222"),
		Args:    usage.Args(0, 0),
	}
	f := cmd.Flags()
	f.BoolVar(&fg, "foreground", false, "run the daemon in this process")
	f.IntVar(&maxSlots, "max-slots", 0, "slots of the default pool (0: config or built-in default)")
	f.StringVar(&level, "log-level", "info", "log level: trace, debug, info, warn, error")
	f.StringVar(&httpAddr, "http", "", "serve the web console on this address (host:port; 127.0.0.1:7777), over config.json's http.listen")
	f.StringVar(&cl.URL, "cluster", "", "keep the logs in the NATS JetStream cluster at this URL (nats://host:port[,...])")
	f.BoolVar(&cl.Embedded, "cluster-embedded", false, "run a NATS JetStream server in the daemon (data under <home>/nats)")
	f.StringSliceVar(&cl.Routes, "routes", nil, "with --cluster-embedded: the other servers' cluster addresses (nats://host:port)")
	f.StringVar(&cl.Name, "node", "", "this daemon's node name in the cluster (default: the home's directory name)")
	f.StringVar(&cl.Host, "nats-host", "", "with --cluster-embedded: the address the NATS server listens on, for clients and routes (default 127.0.0.1; this machine's address for a cluster across machines)")
	f.StringVar(&cl.Advertise, "nats-advertise", "", "with --cluster-embedded: the host:port the other servers route to (default: the listener's; for NAT or 0.0.0.0)")
	f.IntVar(&cl.Port, "nats-port", 0, "with --cluster-embedded: the NATS client port (0: 4222)")
	f.StringVar(&cl.TLSCert, "nats-tls-cert", "", "with a cluster: this node's TLS certificate (PEM; for its addresses, server and client use): mutual TLS on the embedded server's clients and routes and on the daemon's connection")
	f.StringVar(&cl.TLSKey, "nats-tls-key", "", "with a cluster: the key of --nats-tls-cert (PEM)")
	f.StringVar(&cl.TLSCA, "nats-tls-ca", "", "with a cluster: the CA that signed every node's certificate (PEM)")
	f.IntVar(&cl.ClusterPort, "nats-cluster-port", 0, "with --cluster-embedded and --routes: the route port (0: 6222)")
	f.IntVar(&cl.Replicas, "replicas", 0, "with a cluster: replicas of a new stream (0: 1, or 3 with --routes); an existing stream keeps its own")
	f.DurationVar(&cl.OwnerTTL, "owner-ttl", 0, "with a cluster: how long an agent's claim outlives a daemon that stopped renewing it (0: 10s)")
	f.BoolVar(&cl.UnsafeLazyFsync, "unsafe-lazy-fsync", false, "accept NATS servers that may not fsync every write (may lose acknowledged entries in a power cut)")
	_ = cmd.RegisterFlagCompletionFunc("log-level", cobra.FixedCompletions([]string{"trace", "debug", "info", "warn", "error"}, cobra.ShellCompDirectiveNoFileComp))
	cmd.RunE = c.runE(func(ctx context.Context, cmd *cobra.Command, _ []string) error {
		if maxSlots < 0 {
			return exit.Usagef(cmd.UseLine(), "--max-slots must be >= 0, got %d", maxSlots)
		}
		if hclog.LevelFromString(level) == hclog.NoLevel {
			return exit.Usagef(cmd.UseLine(), "unknown --log-level %q (use trace, debug, info, warn or error)", level)
		}
		if msg := checkClusterFlags(&cl); msg != "" {
			return exit.Usagef(cmd.UseLine(), "%s", msg)
		}
		if err := daemon.CheckCluster(cl); err != nil {
			return &exit.Error{Code: exit.DaemonErr, Err: err, Msg: err.Error()}
		}
		if fg {
			return runForeground(ctx, c, daemon.Options{MaxSlots: maxSlots, LogLevel: level, HTTP: httpAddr, Cluster: cl})
		}
		args := []string{"daemon", "start", "--foreground", "--home", c.home, "--log-level", level}
		if maxSlots > 0 {
			args = append(args, "--max-slots", strconv.Itoa(maxSlots))
		}
		if httpAddr != "" {
			args = append(args, "--http", httpAddr)
		}
		return c.daemonCtl().Start(ctx, append(args, clusterArgs(cl)...))
	})
	return cmd
}

// runForeground runs the daemon in this process with the flags' options
// (MaxSlots, LogLevel, HTTP, Cluster).
func runForeground(ctx context.Context, c *cli, o daemon.Options) error {
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		debug.SetMemoryLimit(daemon.DefaultMemoryLimit)
	}
	logger := hclog.New(&hclog.LoggerOptions{
		Name:   "warren",
		Level:  hclog.LevelFromString(o.LogLevel),
		Output: c.stderr,
	})
	// The agent CLIs `warren agents install` put under the home come first
	// for the built-in acp entries and for the agent processes, which get
	// the daemon's PATH (package agentinstall). Without any, PATH is as given.
	if fi, err := os.Stat(agentinstall.Bin(c.home)); err == nil && fi.IsDir() {
		if err := os.Setenv("PATH", agentinstall.Path(c.home, os.Getenv("PATH"))); err != nil {
			return fmt.Errorf("setting PATH: %w", err)
		}
	}
	o.Home, o.Logger, o.Version = c.home, logger, version
	// The registry and the default provider are the binary's policy.
	o.Providers, o.DefaultProvider = builtins.Providers, builtins.DefaultProvider
	err := daemon.Run(ctx, o)
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

func newDaemonStopCmd(c *cli) *cobra.Command {
	var drain time.Duration
	cmd := &cobra.Command{
		Use:   "stop [--drain[=DUR]]",
		Short: "stop the daemon gracefully and wait until it has exited; running turns are interrupted, and re-run at the next start",
		Long: `Stop the daemon and wait until it has exited. A turn that is running is
interrupted (its log records run.interrupted, shutdown; its provider process
is stopped) and the next start re-runs it under the resume policy: a stop
loses no work a kill -9 would keep. Waits keep their tokens.

--drain first lets running turns finish, for up to DUR (default 5m), while
the socket keeps answering: reads are served, new sends and creates are
refused (code 6), and no agent starts a new turn; whatever still runs then
is interrupted as above.`,
		Example: indent("warren daemon stop\nwarren daemon stop --drain\nwarren daemon stop --drain=30s --home /tmp/team"),
		Args:    usage.Args(0, 0),
		RunE: c.runE(func(ctx context.Context, cmd *cobra.Command, _ []string) error {
			if drain < 0 {
				return exit.Usagef(cmd.UseLine(), "--drain takes a duration of 0 or more, got %s", drain)
			}
			return c.daemonCtl().Stop(ctx, drain)
		}),
	}
	cmd.Flags().DurationVar(&drain, "drain", 0, "let running turns finish for up to this long first (no value: 5m)")
	cmd.Flags().Lookup("drain").NoOptDefVal = "5m"
	return cmd
}

func newDaemonStatusCmd(c *cli) *cobra.Command {
	return &cobra.Command{
		Use:     "status",
		Short:   "show the daemon's pid, version, uptime, agents and pools",
		Example: indent("warren daemon status\nwarren daemon status --json"),
		Args:    usage.Args(0, 0),
		RunE:    c.runE(func(ctx context.Context, _ *cobra.Command, _ []string) error { return c.daemonCtl().Status(ctx) }),
	}
}

// daemonCtl starts, stops and checks the home's daemon.
func (c *cli) daemonCtl() *daemonctl.Ctl {
	return &daemonctl.Ctl{Home: c.home, Daemon: c.daemon(), Stdout: c.stdout, Stderr: c.stderr, JSON: c.json}
}

// clusterArgs gives the background daemon the cluster flags it was
// started with.
func clusterArgs(cl daemon.ClusterOptions) []string {
	var a []string
	if cl.URL != "" {
		a = append(a, "--cluster", cl.URL)
	}
	if cl.Embedded {
		a = append(a, "--cluster-embedded")
	}
	if len(cl.Routes) > 0 {
		a = append(a, "--routes", strings.Join(cl.Routes, ","))
	}
	if cl.Name != "" {
		a = append(a, "--node", cl.Name)
	}
	if cl.Host != "" {
		a = append(a, "--nats-host", cl.Host)
	}
	if cl.Advertise != "" {
		a = append(a, "--nats-advertise", cl.Advertise)
	}
	if cl.Port != 0 {
		a = append(a, "--nats-port", strconv.Itoa(cl.Port))
	}
	for flag, v := range map[string]string{"--nats-tls-cert": cl.TLSCert, "--nats-tls-key": cl.TLSKey, "--nats-tls-ca": cl.TLSCA} {
		if v != "" {
			a = append(a, flag, v)
		}
	}
	if cl.ClusterPort != 0 {
		a = append(a, "--nats-cluster-port", strconv.Itoa(cl.ClusterPort))
	}
	if cl.Replicas != 0 {
		a = append(a, "--replicas", strconv.Itoa(cl.Replicas))
	}
	if cl.OwnerTTL != 0 {
		a = append(a, "--owner-ttl", cl.OwnerTTL.String())
	}
	if cl.UnsafeLazyFsync {
		a = append(a, "--unsafe-lazy-fsync")
	}
	return a
}

// checkClusterFlags says what is wrong with the cluster flags ("" when
// nothing) and makes the TLS files' paths absolute (the daemon may run
// from another directory).
func checkClusterFlags(cl *daemon.ClusterOptions) string {
	switch {
	case cl.URL != "" && cl.Embedded:
		return "--cluster and --cluster-embedded exclude each other: join an external cluster or run the server in the daemon"
	case len(cl.Routes) > 0 && !cl.Embedded:
		return "--routes needs --cluster-embedded"
	case cl.UnsafeLazyFsync && cl.URL == "" && !cl.Embedded:
		return "--unsafe-lazy-fsync needs --cluster or --cluster-embedded"
	case (cl.TLSCert != "" || cl.TLSKey != "" || cl.TLSCA != "") && !cl.Embedded && cl.URL == "":
		return "--nats-tls-cert, --nats-tls-key and --nats-tls-ca need --cluster or --cluster-embedded"
	case (cl.Host != "" || cl.Advertise != "") && !cl.Embedded:
		return "--nats-host and --nats-advertise need --cluster-embedded"
	case cl.OwnerTTL != 0 && cl.OwnerTTL < daemon.MinOwnerTTL:
		return fmt.Sprintf("--owner-ttl %s is too short: a lease is renewed every third of it, and a renewal must have time to be answered; use at least %s (the default 10s lets a NATS leader election, up to about 9 s, pass without pausing any agent)", cl.OwnerTTL, daemon.MinOwnerTTL)
	}
	for _, p := range []*string{&cl.TLSCert, &cl.TLSKey, &cl.TLSCA} {
		if *p != "" {
			abs, err := filepath.Abs(*p)
			if err != nil {
				return fmt.Sprintf("TLS file %q: %v", *p, err)
			}
			*p = abs
		}
	}
	return ""
}
