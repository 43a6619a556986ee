package acp

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/warren-dev/warren/agentproc"
	"github.com/warren-dev/warren/provider"
)

// readBuffer is the stdout read buffer; longer lines are assembled up to
// MaxLine.
const readBuffer = 64 << 10

// process is one running agent (agentproc.Piped: the leader of its own
// process group, which teardown kills whole), with short names for its
// parts.
type process struct {
	piped  *agentproc.Piped
	pid    int
	stdin  *os.File
	stdout *os.File
	stderr *agentproc.Tail
	exited <-chan struct{}
}

// startProcess starts argv in dir, in its own process group with the
// daemon's death as its death, has launch record it before it gets any
// input, and calls launch.Ended once it has been reaped
// (agentproc.StartPiped). A command that is not found is ErrNotInstalled.
func startProcess(sp *agentproc.Spawner, argv, env []string, dir string, launch provider.Launch) (*process, error) {
	pp, err := sp.StartPiped(agentproc.Command{Argv: argv, Env: env, Dir: dir, Launch: launch})
	switch {
	case err == nil:
	case errors.Is(err, agentproc.ErrNotRecorded):
		return nil, err
	case errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("%w: %q: %v", ErrNotInstalled, argv[0], err)
	default:
		return nil, fmt.Errorf("starting %q: %w", strings.Join(argv, " "), err)
	}
	return &process{piped: pp, pid: pp.Proc.Pid, stdin: pp.Stdin, stdout: pp.Stdout, stderr: pp.Stderr,
		exited: pp.Exited()}, nil
}

// reader returns a buffered reader of the agent's stdout.
func (p *process) reader() *bufio.Reader { return bufio.NewReaderSize(p.stdout, readBuffer) }

// teardown kills the process group, reaps the leader, closes our pipe ends
// and waits (bounded) for the stderr copy to finish. Idempotent.
func (p *process) teardown() { p.piped.Teardown() }

// stop closes stdin, gives the agent grace to exit, then tears it down.
func (p *process) stop(grace time.Duration) { p.piped.Stop(grace) }

// describe says how the process ended and the end of its stderr, for
// error texts; call it once the process exited.
func (p *process) describe() string {
	st := "still running"
	select {
	case <-p.exited:
		st = "status unknown"
		if state := p.piped.State(); state != nil {
			st = state.String()
		}
	default:
	}
	// Give the stderr copy a moment to catch the last words.
	t := time.NewTimer(100 * time.Millisecond)
	defer t.Stop()
	select {
	case <-p.piped.StderrDone():
	case <-t.C:
	}
	if e := strings.TrimSpace(p.stderr.String()); e != "" {
		return st + "; stderr: " + e
	}
	return st
}
