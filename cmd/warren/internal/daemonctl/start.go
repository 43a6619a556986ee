package daemonctl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/warren-dev/warren/cmd/warren/internal/render"
	"github.com/warren-dev/warren/homedir"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/warren-dev/warren/cmd/warren/internal/client"
	"github.com/warren-dev/warren/cmd/warren/internal/exit"
	"github.com/warren-dev/warren/cmd/warren/internal/reply"
)

// Start runs this binary with args (the command that runs the daemon in
// the foreground) as a process of its own session, its output appended to
// <home>/daemon.log, and waits until the daemon serves or its process
// ends: recovery of a big home may take long, and a daemon that is still
// starting has not failed. Progress goes to stderr.
func (d *Ctl) Start(ctx context.Context, args []string) error {
	if err := homedir.Prepare(d.Home); err != nil {
		return &exit.Error{Code: exit.DaemonErr, Err: err, Msg: err.Error()}
	}
	if st, err := d.Daemon.Call(ctx, "daemon.status", nil); err == nil {
		return exit.Failf("daemon already running (pid %d) at %s", reply.Num(st, "pid"), d.Home)
	} else if client.Refused(err) {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the warren binary to start the daemon: %w", err)
	}
	logPath := filepath.Join(d.Home, "daemon.log")
	logf, err := openDaemonLog(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	startOff, _ := logf.Seek(0, io.SeekEnd)
	cmd := exec.Command(exe, args...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the daemon (%s): %w", exe, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	return d.awaitServing(ctx, cmd.Process.Pid, exited, logf, startOff)
}

// awaitServing polls daemon.status until the daemon of process pid
// answers, its process exits (exited), or ctx ends; logf from offset off
// is what the daemon wrote since it was started.
func (d *Ctl) awaitServing(ctx context.Context, pid int, exited <-chan error, logf *os.File, off int64) error {
	began := time.Now()
	nextNote := began.Add(startNoteAfter)
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		st, err := d.Daemon.Call(ctx, "daemon.status", nil)
		if err == nil {
			return d.started(st)
		}
		if client.Refused(err) {
			return err
		}
		select {
		case err := <-exited:
			fmt.Fprintf(d.Stderr, "the daemon exited before it answered (%v); last lines of %s:\n", err, logf.Name())
			fmt.Fprint(d.Stderr, logTail(logf, off, logTailLines))
			return exit.ErrSilent
		case <-ctx.Done():
			return exit.Failf(
				"stopped waiting; the daemon (pid %d) goes on starting in the background: check it with warren daemon status, see %s",
				pid, logf.Name())
		case now := <-tick.C:
			if now.After(nextNote) {
				nextNote = now.Add(startNoteEvery)
				last := strings.TrimSpace(logTail(logf, off, 1))
				if len(last) > 200 {
					last = last[:200] + "..."
				}
				fmt.Fprintf(d.Stderr, "waiting for the daemon (pid %d) to serve, %s so far; last log line: %s\n",
					pid, now.Sub(began).Round(time.Second), last)
			}
		}
	}
}

// started reports the daemon that answered daemon.status with st.
func (d *Ctl) started(st map[string]any) error {
	if msg := reply.Str(st, "config_error"); msg != "" {
		fmt.Fprintf(d.Stderr, "warning: %s is invalid: %s\n(warren daemon status shows this until the file is fixed)\n",
			filepath.Join(d.Home, "config.json"), msg)
	}
	if d.JSON {
		return reply.JSON(d.Stdout, st)
	}
	if c := reply.Obj(st, "cluster"); reply.Str(c, "role") == "standby" {
		active := reply.Str(c, "active_node")
		if active == "" {
			active = "another node"
		} else {
			active = "node " + active
		}
		fmt.Fprintf(d.Stdout, "daemon started (pid %d) as a standby: node %s stands by while %s runs the cluster's agents, and takes over if it stops (warren daemon status, warren daemon stop work on it)\n",
			reply.Num(st, "pid"), reply.Str(c, "node"), active)
		return nil
	}
	fmt.Fprintf(d.Stdout, "daemon started (pid %d)\n", reply.Num(st, "pid"))
	if runs := reply.List(st, "interrupted"); len(runs) > 0 {
		fmt.Fprintf(d.Stdout, "it found %d interrupted run(s):\n", len(runs))
		render.Interrupted(d.Stdout, runs, "")
	}
	return nil
}

// openDaemonLog opens daemon.log for appending without following a
// symbolic link (and without blocking on a FIFO): a link there would make
// the daemon write wherever it points.
func openDaemonLog(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o600)
	if errors.Is(err, syscall.ELOOP) {
		return nil, &exit.Error{Code: exit.DaemonErr, Err: err, Msg: fmt.Sprintf(
			"the daemon log %s is a symbolic link; warren does not write through links: remove it (rm %s) and start again", path, path)}
	}
	if err != nil {
		return nil, fmt.Errorf("open the daemon log %s: %w", path, err)
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		f.Close()
		return nil, exit.Failf("the daemon log %s is not a regular file (%s); move it away and start again", path, client.FileKind(st))
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
