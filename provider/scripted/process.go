package scripted

import (
	"bufio"
	"errors"
	"os"
	"time"

	"github.com/warren-dev/warren/agentproc"
	"github.com/warren-dev/warren/provider"
)

// readBuffer is the stdout read buffer; longer lines are assembled up to
// MaxLine.
const readBuffer = 64 << 10

// process is one running program (agentproc.Piped), with short names for
// its parts and a buffered reader of its stdout.
type process struct {
	piped  *agentproc.Piped
	pid    int
	stdin  *os.File // our write end
	stdout *os.File // our read end
	rd     *bufio.Reader
	stderr *agentproc.Tail
	exited <-chan struct{} // closed once the process has been reaped
}

// startProcess starts argv in its own process group, with the daemon's
// death as its death, and has launch record it before it gets any input;
// launch.Ended runs once it has been reaped (agentproc.StartPiped). Our
// pipe ends are pollable, so reads and writes honour deadlines.
func startProcess(sp *agentproc.Spawner, argv, env []string, dir string, launch provider.Launch) (*process, error) {
	pp, err := sp.StartPiped(agentproc.Command{Argv: argv, Env: env, Dir: dir, Launch: launch})
	if err != nil {
		return nil, err
	}
	return &process{piped: pp, pid: pp.Proc.Pid, stdin: pp.Stdin, stdout: pp.Stdout,
		rd: bufio.NewReaderSize(pp.Stdout, readBuffer), stderr: pp.Stderr, exited: pp.Exited()}, nil
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
// bytes (ErrLineTooLong past that). A final line without a newline is
// returned before io.EOF.
func (p *process) readLine(max int) ([]byte, error) {
	line, err := agentproc.ReadLine(p.rd, max)
	if errors.Is(err, agentproc.ErrLineTooLong) {
		return nil, ErrLineTooLong
	}
	return line, err
}

// teardown kills the process group, reaps the process, closes our pipe ends
// and waits (bounded) for the stderr copy to finish. It is idempotent.
func (p *process) teardown() { p.piped.Teardown() }

// stop closes stdin, gives the program grace to exit, then tears it down.
func (p *process) stop(grace time.Duration) { p.piped.Stop(grace) }

// exitStatus describes how the process ended ("exit status 3", "signal:
// killed"); call it after teardown.
func (p *process) exitStatus() string {
	st := p.piped.State()
	if st == nil {
		return "status unknown"
	}
	return st.String()
}
