package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/warren-dev/warren/builtins"
	"github.com/warren-dev/warren/daemon"
	"github.com/warren-dev/warren/protocol"
)

// Policy of the client side of daemon start/stop.
const (
	stopDeadline   = 30 * time.Second
	pollInterval   = 50 * time.Millisecond
	logTailLines   = 20
	startNoteAfter = 2 * time.Second // first progress line of a slow start
	startNoteEvery = 5 * time.Second
)

func newDaemonStartCmd(c *cli) *cobra.Command {
	var fg bool
	var maxSlots int
	var level string
	var cl daemon.ClusterOptions
	cmd := &cobra.Command{
		Use:   "start [--foreground] [--max-slots N] [--log-level L] [--cluster nats://... | --cluster-embedded [--routes nats://...]]",
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
		Args:    args(0, 0),
	}
	f := cmd.Flags()
	f.BoolVar(&fg, "foreground", false, "run the daemon in this process")
	f.IntVar(&maxSlots, "max-slots", 0, "slots of the default pool (0: config or built-in default)")
	f.StringVar(&level, "log-level", "info", "log level: trace, debug, info, warn, error")
	f.StringVar(&cl.URL, "cluster", "", "keep the logs in the NATS JetStream cluster at this URL (nats://host:port[,...])")
	f.BoolVar(&cl.Embedded, "cluster-embedded", false, "run a NATS JetStream server in the daemon (data under <home>/nats)")
	f.StringSliceVar(&cl.Routes, "routes", nil, "with --cluster-embedded: the other servers' cluster addresses (nats://host:port)")
	f.StringVar(&cl.Name, "node", "", "this daemon's node name in the cluster (default: the home's directory name)")
	f.IntVar(&cl.Port, "nats-port", 0, "with --cluster-embedded: the NATS client port (0: 4222)")
	f.IntVar(&cl.ClusterPort, "nats-cluster-port", 0, "with --cluster-embedded and --routes: the route port (0: 6222)")
	f.IntVar(&cl.Replicas, "replicas", 0, "with a cluster: replicas of a new stream (0: 1, or 3 with --routes); an existing stream keeps its own")
	f.DurationVar(&cl.OwnerTTL, "owner-ttl", 0, "with a cluster: how long an agent's claim outlives a daemon that stopped renewing it (0: 10s)")
	f.BoolVar(&cl.UnsafeLazyFsync, "unsafe-lazy-fsync", false, "accept NATS servers that may not fsync every write (may lose acknowledged entries in a power cut)")
	_ = cmd.RegisterFlagCompletionFunc("log-level", cobra.FixedCompletions([]string{"trace", "debug", "info", "warn", "error"}, cobra.ShellCompDirectiveNoFileComp))
	cmd.RunE = c.runE(func(ctx context.Context, cmd *cobra.Command, _ []string) error {
		if maxSlots < 0 {
			return usageErr(cmd.UseLine(), "--max-slots must be >= 0, got %d", maxSlots)
		}
		if hclog.LevelFromString(level) == hclog.NoLevel {
			return usageErr(cmd.UseLine(), "unknown --log-level %q (use trace, debug, info, warn or error)", level)
		}
		if cl.URL != "" && cl.Embedded {
			return usageErr(cmd.UseLine(), "--cluster and --cluster-embedded exclude each other: join an external cluster or run the server in the daemon")
		}
		if len(cl.Routes) > 0 && !cl.Embedded {
			return usageErr(cmd.UseLine(), "--routes needs --cluster-embedded")
		}
		if cl.UnsafeLazyFsync && cl.URL == "" && !cl.Embedded {
			return usageErr(cmd.UseLine(), "--unsafe-lazy-fsync needs --cluster or --cluster-embedded")
		}
		if err := daemon.CheckCluster(cl); err != nil {
			return &exitError{code: exitDaemonErr, err: err, msg: err.Error()}
		}
		if fg {
			return runForeground(ctx, c, maxSlots, level, cl)
		}
		return startBackground(ctx, c, maxSlots, level, cl)
	})
	return cmd
}

func runForeground(ctx context.Context, c *cli, maxSlots int, level string, cl daemon.ClusterOptions) error {
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		debug.SetMemoryLimit(daemon.DefaultMemoryLimit)
	}
	logger := hclog.New(&hclog.LoggerOptions{
		Name:   "warren",
		Level:  hclog.LevelFromString(level),
		Output: c.stderr,
	})
	// The agent CLIs `warren agents install` put under the home come first
	// for the built-in acp entries and for the agent processes, which get
	// the daemon's PATH (agents_install.go). Without any, PATH is as given.
	if fi, err := os.Stat(toolsBin(c.home)); err == nil && fi.IsDir() {
		if err := os.Setenv("PATH", toolsPath(c.home, os.Getenv("PATH"))); err != nil {
			return fmt.Errorf("setting PATH: %w", err)
		}
	}
	err := daemon.Run(ctx, daemon.Options{
		Home:     c.home,
		Logger:   logger,
		LogLevel: level,
		MaxSlots: maxSlots,
		Version:  version,
		// The registry and the default provider are the binary's policy.
		Providers:       builtins.Providers,
		DefaultProvider: builtins.DefaultProvider,
		Cluster:         cl,
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

func startBackground(ctx context.Context, c *cli, maxSlots int, level string, cl daemon.ClusterOptions) error {
	if err := daemon.PrepareHome(c.home); err != nil {
		return &exitError{code: exitDaemonErr, err: err, msg: err.Error()}
	}
	if st, err := c.call(ctx, "daemon.status", nil); err == nil {
		return &exitError{code: exitDaemonErr, msg: fmt.Sprintf("daemon already running (pid %d) at %s", num(st, "pid"), c.home)}
	} else if dialRefused(err) {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the warren binary to start the daemon: %w", err)
	}
	logPath := filepath.Join(c.home, "daemon.log")
	logf, err := openDaemonLog(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	startOff, _ := logf.Seek(0, io.SeekEnd)
	childArgs := []string{"daemon", "start", "--foreground", "--home", c.home, "--log-level", level}
	if maxSlots > 0 {
		childArgs = append(childArgs, "--max-slots", strconv.Itoa(maxSlots))
	}
	childArgs = append(childArgs, clusterArgs(cl)...)
	cmd := exec.Command(exe, childArgs...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the daemon (%s): %w", exe, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	// Wait until the daemon serves or its process ends: recovery of a big
	// home may take long, and a daemon that is still starting has not
	// failed. Progress goes to stderr.
	began := time.Now()
	nextNote := began.Add(startNoteAfter)
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		st, err := c.call(ctx, "daemon.status", nil)
		if err == nil {
			if msg := str(st, "config_error"); msg != "" {
				fmt.Fprintf(c.stderr, "warning: %s is invalid: %s\n(warren daemon status shows this until the file is fixed)\n",
					filepath.Join(c.home, "config.json"), msg)
			}
			if c.json {
				return printJSON(c.stdout, st)
			}
			fmt.Fprintf(c.stdout, "daemon started (pid %d)\n", num(st, "pid"))
			return nil
		}
		if dialRefused(err) {
			return err
		}
		select {
		case err := <-exited:
			fmt.Fprintf(c.stderr, "the daemon exited before it answered (%v); last lines of %s:\n", err, logPath)
			fmt.Fprint(c.stderr, logTail(logf, startOff, logTailLines))
			return errSilent
		case <-ctx.Done():
			return &exitError{code: exitDaemonErr, msg: fmt.Sprintf(
				"stopped waiting; the daemon (pid %d) goes on starting in the background: check it with warren daemon status, see %s",
				cmd.Process.Pid, logPath)}
		case now := <-tick.C:
			if now.After(nextNote) {
				nextNote = now.Add(startNoteEvery)
				last := strings.TrimSpace(logTail(logf, startOff, 1))
				if len(last) > 200 {
					last = last[:200] + "..."
				}
				fmt.Fprintf(c.stderr, "waiting for the daemon (pid %d) to serve, %s so far; last log line: %s\n",
					cmd.Process.Pid, now.Sub(began).Round(time.Second), last)
			}
		}
	}
}

// dialRefused reports whether err is the CLI refusing the socket (another
// user's server, a file that is not a socket, a permission problem) rather
// than no daemon or a daemon error: waiting would not change it.
func dialRefused(err error) bool {
	var ee *exitError
	return errors.As(err, &ee) && ee.code != exitNotRunning && !errors.As(err, new(*callError))
}

// openDaemonLog opens daemon.log for appending without following a
// symbolic link (and without blocking on a FIFO): a link there would make
// the daemon write wherever it points.
func openDaemonLog(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o600)
	if errors.Is(err, syscall.ELOOP) {
		return nil, &exitError{code: exitDaemonErr, err: err, msg: fmt.Sprintf(
			"the daemon log %s is a symbolic link; warren does not write through links: remove it (rm %s) and start again", path, path)}
	}
	if err != nil {
		return nil, fmt.Errorf("open the daemon log %s: %w", path, err)
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		f.Close()
		return nil, &exitError{code: exitDaemonErr, msg: fmt.Sprintf(
			"the daemon log %s is not a regular file (%s); move it away and start again", path, fileKind(st))}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open the daemon log %s: %w", path, err)
	}
	return f, nil
}

// logTail returns the last n lines written to f from offset off.
func logTail(f *os.File, off int64, n int) string {
	st, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("  (cannot read %s: %v)\n", f.Name(), err)
	}
	size := st.Size()
	if off < 0 || off > size {
		off = 0
	}
	const maxTail = 64 << 10
	if size-off > maxTail {
		off = size - maxTail
	}
	b := make([]byte, size-off)
	if _, err := f.ReadAt(b, off); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Sprintf("  (cannot read %s: %v)\n", f.Name(), err)
	}
	text := strings.TrimRight(string(b), "\n")
	if text == "" {
		return ""
	}
	lines := strings.Split(text, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	var out bytes.Buffer
	for _, l := range lines {
		fmt.Fprintf(&out, "  %s\n", l)
	}
	return out.String()
}

func newDaemonStopCmd(c *cli) *cobra.Command {
	return &cobra.Command{
		Use:     "stop",
		Short:   "stop the daemon gracefully and wait until it has exited",
		Example: indent("warren daemon stop\nwarren daemon stop --home /tmp/team"),
		Args:    args(0, 0),
		RunE:    c.runE(func(ctx context.Context, _ *cobra.Command, _ []string) error { return daemonStop(ctx, c) }),
	}
}

func daemonStop(ctx context.Context, c *cli) error {
	st, err := c.call(ctx, "daemon.status", nil)
	if err != nil {
		return err
	}
	pid := int(num(st, "pid"))
	if err := checkDaemonOfHome(c.home, st); err != nil {
		return err
	}
	// The daemon checks the home too, at the moment it stops.
	res, err := c.call(ctx, "daemon.shutdown", map[string]any{"home": c.home})
	var pe *protocol.Error
	switch {
	case err == nil:
	case errors.As(err, &pe):
		return rpcErr("daemon.shutdown", err)
	case stopped(c.home, pid) || errors.Is(err, protocol.ErrClientClosed) || isNotRunning(err):
		// The daemon went away before answering: that is what was asked.
		res = map[string]any{}
	default:
		return err
	}
	deadline := time.NewTimer(stopDeadline)
	defer deadline.Stop()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for !stopped(c.home, pid) {
		select {
		case <-deadline.C:
			return &exitError{code: exitDaemonErr, msg: fmt.Sprintf("the daemon (pid %d) accepted the shutdown but is still running after %s", pid, stopDeadline)}
		case <-ctx.Done():
			return &exitError{code: exitDaemonErr, msg: "interrupted while waiting for the daemon to stop"}
		case <-tick.C:
		}
	}
	if c.json {
		return printJSON(c.stdout, res)
	}
	fmt.Fprintf(c.stdout, "daemon stopped (pid %d)\n", pid)
	return nil
}

// checkDaemonOfHome verifies that the daemon that answered daemon.status on
// home's socket serves that home: the home it reports is the same
// directory or, for a daemon too old to report it, its pid is the one in
// the home's daemon.pid. A socket linked in from another home fails.
func checkDaemonOfHome(home string, st map[string]any) error {
	pid := int(num(st, "pid"))
	if h := str(st, "home"); h != "" {
		if daemon.SameHome(h, home) {
			return nil
		}
		return &exitError{code: exitDaemonErr, msg: fmt.Sprintf(
			"the daemon answering on %s (pid %d) serves another home, %s: this home has no daemon of its own, and nothing was done to that one. "+
				"The socket in %s leads to another daemon: remove it; that daemon is reached with --home %s",
			socketPath(home), pid, h, home, h)}
	}
	b, err := os.ReadFile(filepath.Join(home, "daemon.pid"))
	if err == nil && strings.TrimSpace(string(b)) == strconv.Itoa(pid) {
		return nil
	}
	return &exitError{code: exitDaemonErr, msg: fmt.Sprintf(
		"the daemon answering on %s (pid %d) is not the one recorded in %s; nothing was done to it",
		socketPath(home), pid, filepath.Join(home, "daemon.pid"))}
}

// stopped reports whether the socket is gone and the process has exited.
func stopped(home string, pid int) bool {
	if _, err := os.Stat(socketPath(home)); err == nil {
		return false
	}
	if pid <= 0 {
		return true
	}
	err := syscall.Kill(pid, 0)
	return errors.Is(err, syscall.ESRCH)
}

func newDaemonStatusCmd(c *cli) *cobra.Command {
	return &cobra.Command{
		Use:     "status",
		Short:   "show the daemon's pid, version, uptime, agents and pools",
		Example: indent("warren daemon status\nwarren daemon status --json"),
		Args:    args(0, 0),
		RunE:    c.runE(func(ctx context.Context, _ *cobra.Command, _ []string) error { return daemonStatus(ctx, c) }),
	}
}

func daemonStatus(ctx context.Context, c *cli) error {
	st, err := c.call(ctx, "daemon.status", nil)
	if err != nil {
		return err
	}
	if err := checkDaemonOfHome(c.home, st); err != nil {
		return err
	}
	if c.json {
		return printJSON(c.stdout, st)
	}
	up := time.Duration(num(st, "uptime_s")) * time.Second
	fmt.Fprintf(c.stdout, "running   pid %d\n", num(st, "pid"))
	fmt.Fprintf(c.stdout, "home      %s\n", c.home)
	fmt.Fprintf(c.stdout, "boot id   %s\n", str(st, "boot_id"))
	fmt.Fprintf(c.stdout, "version   %s\n", str(st, "version"))
	fmt.Fprintf(c.stdout, "uptime    %s\n", up)
	fmt.Fprintf(c.stdout, "agents    %d\n", num(st, "agents"))
	if msg := str(st, "config_error"); msg != "" {
		fmt.Fprintf(c.stdout, "config    INVALID: %s\n", msg)
	}
	if n := num(st, "degraded"); n > 0 {
		what := "agents whose logs refuse"
		if n == 1 {
			what = "agent whose log refuses"
		}
		fmt.Fprintf(c.stdout, "degraded  %d %s appends (see warren agent list)\n", n, what)
	}
	if q := num(st, "quarantined"); q > 0 {
		fmt.Fprintf(c.stdout, "quarantine %d in %s (unreadable agent directories; see daemon.log)\n",
			q, filepath.Join(c.home, "quarantine"))
	}
	pools := obj(st, "pools")
	if len(pools) == 0 {
		return nil
	}
	names := make([]string, 0, len(pools))
	for n := range pools {
		names = append(names, n)
	}
	sort.Strings(names)
	rows := make([][]string, 0, len(names))
	for _, n := range names {
		p, _ := pools[n].(map[string]any)
		rows = append(rows, []string{n, strconv.FormatInt(num(p, "slots"), 10), strconv.FormatInt(num(p, "live"), 10), strconv.FormatInt(num(p, "held"), 10)})
	}
	fmt.Fprintln(c.stdout)
	table(c.stdout, []string{"POOL", "SLOTS", "LIVE", "HELD"}, rows)
	return nil
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
	if cl.Port != 0 {
		a = append(a, "--nats-port", strconv.Itoa(cl.Port))
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
