package agentproc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"unsafe"
)

// Spawner starts agent processes from one OS thread that never exits, so
// their parent-death signal fires only when the daemon process dies. The
// zero value is not usable; call NewSpawner. A Spawner is meant to live as
// long as the process: its thread is started by the first Start and never
// ends. Safe for concurrent use.
type Spawner struct {
	once sync.Once
	reqs chan spawnReq
}

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

// NewSpawner returns a Spawner; its thread starts with the first Start.
func NewSpawner() *Spawner { return &Spawner{reqs: make(chan spawnReq)} }

func (s *Spawner) run() {
	go func() {
		// Locked and never unlocked: the goroutine never returns, so the
		// runtime never ends this thread, the parent of every child.
		runtime.LockOSThread()
		for r := range s.reqs {
			r.done <- r.cmd.Start()
		}
	}()
}

// Proc is a started agent process, the leader of its own process group.
type Proc struct {
	// Pid is the process id, also its process group id.
	Pid int

	cmd    *exec.Cmd
	mu     sync.Mutex // held while the leader is reaped; guards reaped
	reaped bool
	done   chan struct{}
	state  *os.ProcessState
}

// Start starts cmd in a new process group with SIGKILL as its parent-death
// signal (overriding those fields of cmd.SysProcAttr) and reaps it in the
// background: when the leader exits, the rest of its group is killed before
// the leader is reaped, then Done is closed.
func (s *Spawner) Start(cmd *exec.Cmd) (*Proc, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pgid = 0
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	s.once.Do(s.run)
	done := make(chan error, 1)
	s.reqs <- spawnReq{cmd: cmd, done: done}
	if err := <-done; err != nil {
		return nil, err
	}
	p := &Proc{Pid: cmd.Process.Pid, cmd: cmd, done: make(chan struct{})}
	go p.reap()
	return p, nil
}

// reap waits (without reaping) for the leader to exit, kills what is left
// of its group while the leader's pid still holds the group id (so the
// signal cannot reach a group that reuses the number), then reaps it.
func (p *Proc) reap() {
	waitExited(p.Pid)
	p.mu.Lock()
	_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
	_ = p.cmd.Wait() // the exit status is in ProcessState
	p.state = p.cmd.ProcessState
	p.reaped = true
	p.mu.Unlock()
	close(p.done)
}

// KillGroup sends SIGKILL to the whole process group, unless the leader
// was reaped already (then the group was killed at that moment).
func (p *Proc) KillGroup() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reaped {
		return
	}
	if err := syscall.Kill(-p.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		_ = p.cmd.Process.Kill()
	}
}

// Done is closed once the leader has been reaped.
func (p *Proc) Done() <-chan struct{} { return p.done }

// State is the leader's exit state, once Done is closed.
func (p *Proc) State() *os.ProcessState {
	select {
	case <-p.done:
		return p.state
	default:
		return nil
	}
}

// waitExited blocks until the process has exited, leaving it waitable
// (waitid with WNOWAIT).
func waitExited(pid int) {
	const pPID, wEXITED, wNOWAIT = 1, 4, 0x1000000
	var info [128]byte // siginfo_t
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid), uintptr(unsafe.Pointer(&info[0])), wEXITED|wNOWAIT, 0, 0)
		if errno != syscall.EINTR {
			return
		}
	}
}

// String describes the process for logs.
func (p *Proc) String() string { return fmt.Sprintf("pid %d", p.Pid) }
