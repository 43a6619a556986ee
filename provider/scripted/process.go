package scripted

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/warren-dev/warren/agentproc"
	"github.com/warren-dev/warren/provider"
)

const (
	// stderrKeep is how much of a program's stderr is kept for errors.
	stderrKeep = 8 << 10
	// stderrDrain bounds the wait for the stderr pipe to reach EOF after
	// the process exited (a grandchild outside the process group could hold
	// it open forever).
	stderrDrain = 2 * time.Second
	// readBuffer is the stdout read buffer; longer lines are assembled up
	// to MaxLine.
	readBuffer = 64 << 10
)

// process is one running program with its pipes.
type process struct {
	proc   *agentproc.Proc
	pid    int
	stdin  *os.File // our write end
	stdout *os.File // our read end
	rd     *bufio.Reader

	stderr     *agentproc.Tail
	stderrDone chan struct{}

	exited chan struct{} // closed once Wait returned
	state  *os.ProcessState

	teardownOnce sync.Once
}

// startProcess starts argv in its own process group, with the daemon's
// death as its death (agentproc), and has launch record it before it gets
// any input; launch.Ended runs once it has been reaped. Our pipe ends are
// pollable, so reads and writes honour deadlines.
func startProcess(sp *agentproc.Spawner, argv, env []string, dir string, launch provider.Launch) (*process, error) {
	ended := func() {
		if launch != nil {
			launch.Ended()
		}
	}
	var closers []*os.File
	closeAll := func() {
		for _, f := range closers {
			_ = f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			closers = append(closers, r, w)
		}
		return r, w, err
	}
	inR, inW, err := pipe()
	if err != nil {
		ended()
		return nil, fmt.Errorf("creating stdin pipe: %w", err)
	}
	outR, outW, err := pipe()
	if err != nil {
		closeAll()
		ended()
		return nil, fmt.Errorf("creating stdout pipe: %w", err)
	}
	errR, errW, err := pipe()
	if err != nil {
		closeAll()
		ended()
		return nil, fmt.Errorf("creating stderr pipe: %w", err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Dir = dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	proc, err := sp.Start(cmd)
	if err != nil {
		closeAll()
		ended()
		return nil, err
	}
	// The child has its own copies of its ends.
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
			return nil, fmt.Errorf("process %d could not be recorded, so it was killed: %w", proc.Pid, err)
		}
	}

	p := &process{
		proc:       proc,
		pid:        proc.Pid,
		stdin:      inW,
		stdout:     outR,
		rd:         bufio.NewReaderSize(outR, readBuffer),
		stderr:     agentproc.NewTail(stderrKeep),
		stderrDone: make(chan struct{}),
		exited:     make(chan struct{}),
	}
	// stderr is kept in the ring (for error messages) and, when the
	// daemon gives one, in the agent's stderr file (healthy turns too).
	var errSink io.Writer = p.stderr
	if launch != nil {
		if w := launch.Stderr(); w != nil {
			errSink = io.MultiWriter(p.stderr, w)
		}
	}
	go func() {
		_, _ = io.Copy(errSink, errR)
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

// hasExited reports whether the process has been reaped.
func (p *process) hasExited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// setDeadline sets the read and write deadline (zero: none).
func (p *process) setDeadline(t time.Time) {
	_ = p.stdout.SetReadDeadline(t)
	_ = p.stdin.SetWriteDeadline(t)
}

// interrupt makes blocked reads and writes return at once.
func (p *process) interrupt() { p.setDeadline(time.Unix(1, 0)) }

// writeLine writes data and a newline.
func (p *process) writeLine(data []byte) error {
	_, err := p.stdin.Write(append(data, '\n'))
	return err
}

// readLine returns the next line without its newline, holding at most max
// bytes. A final line without a newline is returned before io.EOF.
func (p *process) readLine(max int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := p.rd.ReadSlice('\n')
		n := len(chunk)
		if err == nil {
			n-- // the newline
		}
		if len(line)+n > max {
			return nil, ErrLineTooLong
		}
		switch {
		case err == nil:
			return append(line, chunk[:n]...), nil
		case errors.Is(err, bufio.ErrBufferFull):
			line = append(line, chunk...)
		case errors.Is(err, io.EOF) && len(line)+len(chunk) > 0:
			return append(line, chunk...), nil
		default:
			return nil, err
		}
	}
}

// kill sends SIGKILL to the whole process group.
func (p *process) kill() { p.proc.KillGroup() }

// teardown kills the process group, reaps the process, closes our pipe ends
// and waits (bounded) for the stderr copy to finish. It is idempotent.
func (p *process) teardown() {
	p.teardownOnce.Do(func() {
		p.kill()
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

// stop closes stdin, gives the program grace to exit, then tears it down.
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

// exitStatus describes how the process ended ("exit status 3", "signal:
// killed"); call it after teardown.
func (p *process) exitStatus() string {
	if p.state == nil {
		return "status unknown"
	}
	return p.state.String()
}
