// Package daemonctl is the client side of `warren daemon start`, `stop`
// and `status`: it starts the daemon in the background and waits until it
// serves, printing progress while recovery runs and the last lines of
// daemon.log if it fails; it asks the daemon to stop and waits until its
// process has exited, falling back to SIGTERM when the socket refuses or
// does not answer (signal.go says how the pid is made sure of); and before
// either stop or status it checks that the daemon answering on the home's
// socket serves that home.
package daemonctl

import (
	"context"
	"errors"
	"fmt"
	"github.com/warren-dev/warren/homedir"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/warren-dev/warren/cmd/warren/internal/client"
	"github.com/warren-dev/warren/cmd/warren/internal/exit"
	"github.com/warren-dev/warren/cmd/warren/internal/render"
	"github.com/warren-dev/warren/cmd/warren/internal/reply"
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

// Caller makes one RPC to the daemon of the home (client.Client does).
type Caller interface {
	Call(ctx context.Context, method string, params map[string]any) (map[string]any, error)
}

// Ctl controls the daemon of one home.
type Ctl struct {
	Home   string
	Daemon Caller
	Stdout io.Writer
	Stderr io.Writer
	JSON   bool // print the RPC result as JSON instead of text
}

// Stop asks the daemon to stop, after letting running turns finish for
// up to drain (0: it interrupts them at once; the next start re-runs
// them), and waits until it has exited. When the socket refuses or does
// not answer in time it stops the daemon with a signal instead, once sure
// of its pid (signal.go).
func (d *Ctl) Stop(ctx context.Context, drain time.Duration) error {
	st, err := d.callInTime(ctx, "daemon.status", nil)
	if err != nil {
		if unanswered(ctx, err) {
			return d.stopBySignal(ctx, err)
		}
		return err
	}
	pid := int(reply.Num(st, "pid"))
	if err := checkDaemonOfHome(d.Home, st); err != nil {
		return err
	}
	// The daemon checks the home too, at the moment it stops.
	params := map[string]any{"home": d.Home}
	if drain > 0 {
		params["drain_s"] = int64((drain + time.Second - 1) / time.Second)
		fmt.Fprintf(d.Stderr, "letting running turns finish for up to %s (new sends are refused meanwhile)...\n", drain)
	}
	res, err := d.callInTime(ctx, "daemon.shutdown", params)
	var pe *protocol.Error
	switch {
	case err == nil:
	case refusedOrLate(ctx, err):
		return d.stopBySignal(ctx, err)
	case errors.As(err, &pe):
		return client.RPCError("daemon.shutdown", err)
	case stopped(d.Home, pid) || errors.Is(err, protocol.ErrClientClosed) || client.IsNotRunning(err):
		// The daemon went away before answering: that is what was asked.
		res = map[string]any{}
	default:
		return err
	}
	deadline := time.NewTimer(stopDeadline + drain)
	defer deadline.Stop()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for !stopped(d.Home, pid) {
		select {
		case <-deadline.C:
			return exit.Failf("the daemon (pid %d) accepted the shutdown but is still running after %s", pid, stopDeadline+drain)
		case <-ctx.Done():
			return &exit.Error{Code: exit.DaemonErr, Msg: "interrupted while waiting for the daemon to stop"}
		case <-tick.C:
		}
	}
	if d.JSON {
		return reply.JSON(d.Stdout, res)
	}
	fmt.Fprintf(d.Stdout, "daemon stopped (pid %d)\n", pid)
	return nil
}

// Status prints the daemon's status.
func (d *Ctl) Status(ctx context.Context) error {
	st, err := d.Daemon.Call(ctx, "daemon.status", nil)
	if err != nil {
		return err
	}
	if err := checkDaemonOfHome(d.Home, st); err != nil {
		return err
	}
	if d.JSON {
		return reply.JSON(d.Stdout, st)
	}
	render.Status(d.Stdout, d.Home, st)
	return nil
}

// checkDaemonOfHome verifies that the daemon that answered daemon.status on
// home's socket serves that home: the home it reports is the same
// directory or, for a daemon too old to report it, its pid is the one in
// the home's daemon.pid. A socket linked in from another home fails.
func checkDaemonOfHome(home string, st map[string]any) error {
	pid := int(reply.Num(st, "pid"))
	if h := reply.Str(st, "home"); h != "" {
		if homedir.Same(h, home) {
			return nil
		}
		return exit.Failf(
			"the daemon answering on %s (pid %d) serves another home, %s: this home has no daemon of its own, and nothing was done to that one. "+
				"The socket in %s leads to another daemon: remove it; that daemon is reached with --home %s",
			homedir.SocketPath(home), pid, h, home, h)
	}
	b, err := os.ReadFile(filepath.Join(home, "daemon.pid"))
	if err == nil && strings.TrimSpace(string(b)) == strconv.Itoa(pid) {
		return nil
	}
	return exit.Failf(
		"the daemon answering on %s (pid %d) is not the one recorded in %s; nothing was done to it",
		homedir.SocketPath(home), pid, filepath.Join(home, "daemon.pid"))
}

// stopped reports whether the socket is gone and the process has exited.
func stopped(home string, pid int) bool {
	if _, err := os.Stat(homedir.SocketPath(home)); err == nil {
		return false
	}
	if pid <= 0 {
		return true
	}
	err := syscall.Kill(pid, 0)
	return errors.Is(err, syscall.ESRCH)
}
