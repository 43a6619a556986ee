package agentproc

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"
)

// Launch is the record a caller keeps of one process start (provider.Launch
// satisfies it): Command first, Started before the process gets any
// input, Ended once it has been reaped or its start failed, Stderr a copy
// of what it writes to stderr (nil: none).
type Launch interface {
	// Command is the command line that starts argv in dir with env: argv
	// itself, or argv wrapped (a sandbox). An error means it cannot be
	// started; one wrapping exec.ErrNotFound, that argv[0] is missing.
	Command(argv []string, dir string, env []string) ([]string, error)
	Started(pid int) error
	Ended()
	Stderr() io.Writer
}

// ErrNotRecorded is StartPiped's error when Launch.Started failed: the
// process was killed and reaped before it got any input.
var ErrNotRecorded = errors.New("the process could not be recorded, so it was killed")

// Command says what StartPiped starts.
type Command struct {
	Argv []string // Argv[0] is looked up in PATH as exec.Command does
	Env  []string
	Dir  string
	// Launch records the process; nil: none.
	Launch Launch
	// StderrKeep is how many bytes of the end of stderr Piped.Stderr
	// keeps (see NewTail); 0: DefaultStderrKeep.
	StderrKeep int
	// StderrDrain bounds Teardown's wait for the stderr pipe to reach
	// EOF after the process exited (a grandchild outside the group could
	// hold it open forever); 0: DefaultStderrDrain.
	StderrDrain time.Duration
}

// Defaults of Command.
const (
	DefaultStderrKeep  = 8 << 10
	DefaultStderrDrain = 2 * time.Second
)

// Piped is an agent process started by StartPiped, with our ends of its
// stdin and stdout (pollable: reads and writes honour deadlines) and the
// end of its stderr.
type Piped struct {
	Proc   *Proc
	Stdin  *os.File // our write end
	Stdout *os.File // our read end
	// Stderr keeps the end of what the process wrote to stderr, for
	// error texts.
	Stderr *Tail

	drain        time.Duration
	stderrDone   chan struct{}
	exited       chan struct{}
	state        *os.ProcessState
	teardownOnce sync.Once
}

// StartPiped starts c.Argv with pipes to its standard streams, in its own
// process group with the daemon's death as its death (Start). c.Launch
// records it before it gets any input and learns of its end once it has
// been reaped; if Started fails, the process is killed and reaped
// (ErrNotRecorded). Its
// stderr is copied to Piped.Stderr and to c.Launch's Stderr. A failed
// start closes every pipe, calls Ended and returns Start's error as it is
// (errors.Is exec.ErrNotFound for a missing command).
func (s *Spawner) StartPiped(c Command) (*Piped, error) {
	if c.StderrKeep <= 0 {
		c.StderrKeep = DefaultStderrKeep
	}
	if c.StderrDrain <= 0 {
		c.StderrDrain = DefaultStderrDrain
	}
	ended := func() {
		if c.Launch != nil {
			c.Launch.Ended()
		}
	}
	argv := c.Argv
	if c.Launch != nil {
		var err error
		if argv, err = c.Launch.Command(c.Argv, c.Dir, c.Env); err != nil {
			ended()
			return nil, err
		}
	}
	var ends [6]*os.File // stdin r, w; stdout r, w; stderr r, w
	for i := 0; i < len(ends); i += 2 {
		r, w, err := os.Pipe()
		if err != nil {
			closeFiles(ends[:i]...)
			ended()
			return nil, fmt.Errorf("creating the process's pipes: %w", err)
		}
		ends[i], ends[i+1] = r, w
	}
	inR, inW, outR, outW, errR, errW := ends[0], ends[1], ends[2], ends[3], ends[4], ends[5]
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = c.Env
	cmd.Dir = c.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	proc, err := s.Start(cmd)
	if err != nil {
		closeFiles(ends[:]...)
		ended()
		return nil, err
	}
	// The child has its own copies of its ends.
	closeFiles(inR, outW, errW)
	if c.Launch != nil {
		if err := c.Launch.Started(proc.Pid); err != nil {
			proc.KillGroup()
			<-proc.Done()
			closeFiles(inW, outR, errR)
			ended()
			return nil, fmt.Errorf("%w: pid %d: %w", ErrNotRecorded, proc.Pid, err)
		}
	}
	p := &Piped{Proc: proc, Stdin: inW, Stdout: outR, Stderr: NewTail(c.StderrKeep),
		drain: c.StderrDrain, stderrDone: make(chan struct{}), exited: make(chan struct{})}
	var errSink io.Writer = p.Stderr
	if c.Launch != nil {
		if w := c.Launch.Stderr(); w != nil {
			errSink = io.MultiWriter(p.Stderr, w)
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

func closeFiles(fs ...*os.File) {
	for _, f := range fs {
		_ = f.Close()
	}
}

// Exited is closed once the process has been reaped and Launch.Ended has
// run.
func (p *Piped) Exited() <-chan struct{} { return p.exited }

// State is the process's exit state once Exited is closed (nil before).
func (p *Piped) State() *os.ProcessState {
	select {
	case <-p.exited:
		return p.state
	default:
		return nil
	}
}

// StderrDone is closed once the stderr copy reached EOF.
func (p *Piped) StderrDone() <-chan struct{} { return p.stderrDone }

// Teardown kills the process group, waits until the process has been
// reaped, closes our pipe ends and waits (at most StderrDrain) for the
// stderr copy to finish. Idempotent.
func (p *Piped) Teardown() {
	p.teardownOnce.Do(func() {
		p.Proc.KillGroup()
		<-p.exited
		_ = p.Stdin.Close()
		_ = p.Stdout.Close()
		t := time.NewTimer(p.drain)
		defer t.Stop()
		select {
		case <-p.stderrDone:
		case <-t.C:
		}
	})
}

// Stop closes the process's stdin, gives it grace to exit, then tears it
// down.
func (p *Piped) Stop(grace time.Duration) {
	_ = p.Stdin.Close()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.exited:
	case <-t.C:
	}
	p.Teardown()
}
