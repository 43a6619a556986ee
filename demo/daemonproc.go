package demo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/warren-dev/warren/protocol"
)

// daemonProc is a daemon the demo started as a child process.
type daemonProc struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // the Wait result, valid once exited is closed
}

// startDaemon runs `<binary> daemon start --foreground --home <home>`, its
// output appended to <home>/daemon.log, and waits until it answers
// daemon.status.
func startDaemon(ctx context.Context, binary, home string, deadline time.Duration) (*daemonProc, map[string]any, error) {
	logPath := filepath.Join(home, "daemon.log")
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("open %s: %w", logPath, err)
	}
	defer logf.Close()
	cmd := exec.Command(binary, "daemon", "start", "--foreground", "--home", home)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // Ctrl-C goes to the demo, not the daemon
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("start %s daemon: %w", binary, err)
	}
	p := &daemonProc{cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	st, err := p.waitReady(ctx, home, deadline)
	if err != nil {
		p.kill()
		return nil, nil, fmt.Errorf("%w (daemon log: %s)", err, logPath)
	}
	return p, st, nil
}

func (p *daemonProc) pid() int { return p.cmd.Process.Pid }

func (p *daemonProc) waitReady(ctx context.Context, home string, deadline time.Duration) (map[string]any, error) {
	timer := time.NewTimer(deadline)
	defer timer.Stop()
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		if st, err := call(ctx, home, "daemon.status", nil); err == nil {
			return st, nil
		}
		select {
		case <-p.exited:
			return nil, fmt.Errorf("the daemon (pid %d) exited before it answered: %v", p.pid(), p.err)
		case <-timer.C:
			return nil, fmt.Errorf("the daemon (pid %d) did not answer daemon.status within %s", p.pid(), deadline)
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *daemonProc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// stop asks the daemon to shut down and waits for it to exit, killing it
// after deadline.
func (p *daemonProc) stop(ctx context.Context, home string, deadline time.Duration) error {
	if _, err := call(ctx, home, "daemon.shutdown", nil); err != nil {
		// The daemon may close the connection as it stops; the exit below
		// is what counts.
		var pe *protocol.Error
		if errors.As(err, &pe) {
			p.kill()
			return fmt.Errorf("daemon.shutdown: %w", err)
		}
	}
	timer := time.NewTimer(deadline)
	defer timer.Stop()
	select {
	case <-p.exited:
		return nil
	case <-timer.C:
		p.kill()
		return fmt.Errorf("the daemon (pid %d) did not exit within %s of daemon.shutdown; killed it", p.pid(), deadline)
	}
}

// call makes one RPC on a fresh connection to the daemon of home.
func call(ctx context.Context, home, method string, params map[string]any) (map[string]any, error) {
	cl, err := protocol.Dial(ctx, filepath.Join(home, "daemon.sock"))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	return cl.Call(ctx, method, params)
}
