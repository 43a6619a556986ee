package acp

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/warren-dev/warren/agentproc"
	"github.com/warren-dev/warren/provider"
)

const (
	// stderrKeep is how much of an agent's stderr is kept for error texts.
	stderrKeep = 8 << 10
	// stderrDrain bounds the wait for the stderr pipe to reach EOF after
	// the process exited (a grandchild outside the group could hold it).
	stderrDrain = 2 * time.Second
	readBuffer  = 64 << 10
)

// process is one running agent with its pipes. The agent is the leader of
// its own process group; teardown kills the whole group.
type process struct {
	proc   *agentproc.Proc
	pid    int
	stdin  *os.File
	stdout *os.File

	stderr     *agentproc.Tail
	stderrDone chan struct{}
	exited     chan struct{}
	state      *os.ProcessState

	teardownOnce sync.Once
}

// stderrWriter is implemented by a Launch that has a per-agent stderr file
// (the daemon's); the agent's stderr is copied there as well.
type stderrWriter interface{ Stderr() io.Writer }

// startProcess starts argv in dir, in its own process group with the
// daemon's death as its death, has launch record it before it gets any
// input, and calls launch.Ended once it has been reaped.
func startProcess(sp *agentproc.Spawner, argv, env []string, dir string, launch provider.Launch) (*process, error) {
	ended := func() {
		if launch != nil {
			launch.Ended()
		}
	}
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			_ = f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	inR, inW, err := pipe()
	if err == nil {
		var outR, outW, errR, errW *os.File
		if outR, outW, err = pipe(); err == nil {
			if errR, errW, err = pipe(); err == nil {
				return launchPiped(sp, argv, env, dir, launch, [6]*os.File{inR, inW, outR, outW, errR, errW}, ended)
			}
		}
	}
	closeAll()
	ended()
	return nil, fmt.Errorf("creating the agent's pipes: %w", err)
}

func launchPiped(sp *agentproc.Spawner, argv, env []string, dir string, launch provider.Launch, f [6]*os.File, ended func()) (*process, error) {
	inR, inW, outR, outW, errR, errW := f[0], f[1], f[2], f[3], f[4], f[5]
	closeAll := func() {
		for _, x := range f {
			_ = x.Close()
		}
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Dir = dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	proc, err := sp.Start(cmd)
	if err != nil {
		closeAll()
		ended()
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %q: %v", ErrNotInstalled, argv[0], err)
		}
		return nil, fmt.Errorf("starting %q: %w", strings.Join(argv, " "), err)
	}
	_ = inR.Close()
	_ = outW.Close()
	_ = errW.Close()
	if launch != nil {
		if err := launch.Started(proc.Pid); err != nil {
			proc.KillGroup()
			<-proc.Done()
			_ = inW.Close()
			_ = outR.Close()
			_ = errR.Close()
			ended()
			return nil, fmt.Errorf("agent process %d could not be recorded, so it was killed: %w", proc.Pid, err)
		}
	}
	p := &process{proc: proc, pid: proc.Pid, stdin: inW, stdout: outR, stderr: agentproc.NewTail(stderrKeep),
		stderrDone: make(chan struct{}), exited: make(chan struct{})}
	var errOut io.Writer = p.stderr
	if sw, ok := launch.(stderrWriter); ok && sw.Stderr() != nil {
		errOut = io.MultiWriter(p.stderr, sw.Stderr())
	}
	go func() {
		_, _ = io.Copy(errOut, errR)
		_ = errR.Close()
		close(p.stderrDone)
	}()
	go func() {
		<-proc.Done()
		p.state = proc.State()
		ended()
		close(p.exited)
	}()
	return p, nil
}

// reader returns a buffered reader of the agent's stdout.
func (p *process) reader() *bufio.Reader { return bufio.NewReaderSize(p.stdout, readBuffer) }

// teardown kills the process group, reaps the leader, closes our pipe ends
// and waits (bounded) for the stderr copy to finish. Idempotent.
func (p *process) teardown() {
	p.teardownOnce.Do(func() {
		p.proc.KillGroup()
		<-p.exited
		_ = p.stdin.Close()
		_ = p.stdout.Close()
		t := time.NewTimer(stderrDrain)
		defer t.Stop()
		select {
		case <-p.stderrDone:
		case <-t.C:
		}
	})
}

// stop closes stdin, gives the agent grace to exit, then tears it down.
func (p *process) stop(grace time.Duration) {
	_ = p.stdin.Close()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.exited:
	case <-t.C:
	}
	p.teardown()
}

// describe says how the process ended and the end of its stderr, for
// error texts; call it once the process exited.
func (p *process) describe() string {
	st := "still running"
	select {
	case <-p.exited:
		st = "status unknown"
		if p.state != nil {
			st = p.state.String()
		}
	default:
	}
	// Give the stderr copy a moment to catch the last words.
	t := time.NewTimer(100 * time.Millisecond)
	defer t.Stop()
	select {
	case <-p.stderrDone:
	case <-t.C:
	}
	if e := strings.TrimSpace(p.stderr.String()); e != "" {
		return st + "; stderr: " + e
	}
	return st
}
