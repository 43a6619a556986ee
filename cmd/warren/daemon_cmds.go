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
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/daemon"
	"github.com/warren-dev/warren/protocol"
)

// Policy of the client side of daemon start/stop.
const (
	startDeadline = 15 * time.Second
	stopDeadline  = 30 * time.Second
	pollInterval  = 50 * time.Millisecond
	logTailLines  = 20
)

func cmdDaemonStart(ctx context.Context, c *cli, args []string) error {
	f := newFlags(c, "daemon start")
	fg := f.Bool("foreground", false, "run the daemon in this process")
	maxSlots := f.Int("max-slots", 0, "slots of the default pool (0: config or built-in default)")
	level := f.String("log-level", "info", "log level: trace, debug, info, warn, error")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	if *maxSlots < 0 {
		return usageErr(f.usage, "--max-slots must be >= 0, got %d", *maxSlots)
	}
	if hclog.LevelFromString(*level) == hclog.NoLevel {
		return usageErr(f.usage, "unknown --log-level %q (use trace, debug, info, warn or error)", *level)
	}
	if *fg {
		return runForeground(ctx, c, *maxSlots, *level)
	}
	return startBackground(ctx, c, *maxSlots, *level)
}

func runForeground(ctx context.Context, c *cli, maxSlots int, level string) error {
	logger := hclog.New(&hclog.LoggerOptions{
		Name:   "warren",
		Level:  hclog.LevelFromString(level),
		Output: c.stderr,
	})
	err := daemon.Run(ctx, daemon.Options{
		Home:     c.home,
		Logger:   logger,
		LogLevel: level,
		MaxSlots: maxSlots,
		Version:  version,
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

func startBackground(ctx context.Context, c *cli, maxSlots int, level string) error {
	if st, err := c.call(ctx, "daemon.status", nil); err == nil {
		return &exitError{code: exitDaemonErr, msg: fmt.Sprintf("daemon already running (pid %d) at %s", num(st, "pid"), c.home)}
	}
	if err := os.MkdirAll(c.home, 0o700); err != nil {
		return fmt.Errorf("create home %s: %w", c.home, err)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the warren binary to start the daemon: %w", err)
	}
	logPath := filepath.Join(c.home, "daemon.log")
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open the daemon log %s: %w", logPath, err)
	}
	defer logf.Close()
	startOff, _ := logf.Seek(0, io.SeekEnd)
	childArgs := []string{"daemon", "start", "--foreground", "--home", c.home, "--log-level", level}
	if maxSlots > 0 {
		childArgs = append(childArgs, "--max-slots", strconv.Itoa(maxSlots))
	}
	cmd := exec.Command(exe, childArgs...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the daemon (%s): %w", exe, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	tty := isTTY(c.stderr)
	deadline := time.NewTimer(startDeadline)
	defer deadline.Stop()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	dots, ticks := 0, 0
	for {
		if st, err := c.call(ctx, "daemon.status", nil); err == nil {
			if dots > 0 {
				fmt.Fprintln(c.stderr)
			}
			if c.json {
				return printJSON(c.stdout, st)
			}
			fmt.Fprintf(c.stdout, "daemon started (pid %d)\n", num(st, "pid"))
			return nil
		}
		select {
		case err := <-exited:
			if dots > 0 {
				fmt.Fprintln(c.stderr)
			}
			fmt.Fprintf(c.stderr, "the daemon exited before it answered (%v); last lines of %s:\n", err, logPath)
			fmt.Fprint(c.stderr, logTail(logPath, startOff, logTailLines))
			return errSilent
		case <-deadline.C:
			if dots > 0 {
				fmt.Fprintln(c.stderr)
			}
			return &exitError{code: exitDaemonErr, msg: fmt.Sprintf("the daemon (pid %d) did not answer within %s; see %s", cmd.Process.Pid, startDeadline, logPath)}
		case <-ctx.Done():
			return &exitError{code: exitDaemonErr, msg: fmt.Sprintf("interrupted while waiting for the daemon (pid %d) to start", cmd.Process.Pid)}
		case <-tick.C:
			ticks++
			if tty && ticks%5 == 0 {
				fmt.Fprint(c.stderr, ".")
				dots++
			}
		}
	}
}

// logTail returns the last n lines written to path from offset off.
func logTail(path string, off int64, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("  (cannot read %s: %v)\n", path, err)
	}
	if off >= 0 && off <= int64(len(b)) {
		b = b[off:]
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	var out bytes.Buffer
	for _, l := range lines {
		fmt.Fprintf(&out, "  %s\n", l)
	}
	return out.String()
}

func isTTY(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func cmdDaemonStop(ctx context.Context, c *cli, args []string) error {
	f := newFlags(c, "daemon stop")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	st, err := c.call(ctx, "daemon.status", nil)
	if err != nil {
		return err
	}
	pid := int(num(st, "pid"))
	res, err := c.call(ctx, "daemon.shutdown", nil)
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

func cmdDaemonStatus(ctx context.Context, c *cli, args []string) error {
	f := newFlags(c, "daemon status")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	st, show, err := c.callOut(ctx, "daemon.status", nil)
	if err != nil || !show {
		return err
	}
	up := time.Duration(num(st, "uptime_s")) * time.Second
	fmt.Fprintf(c.stdout, "running   pid %d\n", num(st, "pid"))
	fmt.Fprintf(c.stdout, "home      %s\n", c.home)
	fmt.Fprintf(c.stdout, "boot id   %s\n", str(st, "boot_id"))
	fmt.Fprintf(c.stdout, "version   %s\n", str(st, "version"))
	fmt.Fprintf(c.stdout, "uptime    %s\n", up)
	fmt.Fprintf(c.stdout, "agents    %d\n", num(st, "agents"))
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
