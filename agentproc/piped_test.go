package agentproc

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// fakeLaunch records what StartPiped tells a Launch.
type fakeLaunch struct {
	mu         sync.Mutex
	startedPid int
	startErr   error
	ended      chan struct{}
	endedN     int
	stderr     bytes.Buffer
}

func newFakeLaunch() *fakeLaunch { return &fakeLaunch{ended: make(chan struct{})} }

func (l *fakeLaunch) Command(argv []string, _ string, _ []string) ([]string, error) { return argv, nil }

func (l *fakeLaunch) Started(pid int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.startedPid = pid
	return l.startErr
}

func (l *fakeLaunch) Ended() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.endedN++
	if l.endedN == 1 {
		close(l.ended)
	}
}

func (l *fakeLaunch) Stderr() io.Writer { return &lockedWriter{l} }

// lockedWriter writes to the fake's stderr buffer under its lock.
type lockedWriter struct{ l *fakeLaunch }

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.l.mu.Lock()
	defer w.l.mu.Unlock()
	return w.l.stderr.Write(p)
}

func (l *fakeLaunch) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stderr.String()
}

func (l *fakeLaunch) endedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.endedN
}

func command(l *fakeLaunch, argv ...string) Command {
	c := Command{Argv: argv, Env: append(os.Environ(), "PIPED_TEST=yes"), Dir: os.TempDir(),
		StderrKeep: 1 << 10, StderrDrain: 5 * time.Second}
	if l != nil {
		c.Launch = l
	}
	return c
}

// TestStartPipedRunsWithPipesEnvAndLaunch: the process reads our stdin,
// writes our stdout, runs in Dir with Env, is recorded before it gets
// input, leads its own group; its stderr reaches the Tail and the
// Launch's writer; Ended runs once it is reaped, and its exit state is
// kept.
func TestStartPipedRunsWithPipesEnvAndLaunch(t *testing.T) {
	l := newFakeLaunch()
	sp := NewSpawner()
	p, err := sp.StartPiped(command(l, "sh", "-c", `read line; echo "got $line in $(pwd) $PIPED_TEST"; echo "last words" >&2; exit 3`))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Teardown()
	l.mu.Lock()
	pid := l.startedPid
	l.mu.Unlock()
	if pid != p.Proc.Pid || pid == 0 {
		t.Fatalf("Started got pid %d, process is %d", pid, p.Proc.Pid)
	}
	if pgid, err := syscall.Getpgid(pid); err == nil && pgid != pid {
		t.Fatalf("process group %d, want its own (%d)", pgid, pid)
	}
	if _, err := p.Stdin.Write([]byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(p.Stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if want := "got ping in " + strings.TrimSuffix(os.TempDir(), "/") + " yes\n"; line != want {
		t.Fatalf("stdout %q, want %q", line, want)
	}
	<-p.Exited()
	if l.endedCount() != 1 {
		t.Fatalf("Ended ran %d times once the process was reaped, want 1", l.endedCount())
	}
	if st := p.State(); st == nil || st.ExitCode() != 3 {
		t.Fatalf("State = %v, want exit status 3", st)
	}
	<-p.StderrDone()
	if got := p.Stderr.String(); got != "last words\n" {
		t.Fatalf("Tail = %q", got)
	}
	if got := l.text(); got != "last words\n" {
		t.Fatalf("Launch's stderr = %q", got)
	}
}

// TestStartPipedKillsWhatCannotBeRecorded: when Started fails, the
// process is killed and reaped before it gets input, Ended runs, and the
// error is ErrNotRecorded wrapping Started's.
func TestStartPipedKillsWhatCannotBeRecorded(t *testing.T) {
	l := newFakeLaunch()
	l.startErr = errors.New("disk full")
	_, err := NewSpawner().StartPiped(command(l, "sleep", "600"))
	if !errors.Is(err, ErrNotRecorded) || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("err = %v, want ErrNotRecorded with Started's error", err)
	}
	l.mu.Lock()
	pid := l.startedPid
	l.mu.Unlock()
	if pid == 0 {
		t.Fatal("Started was not called")
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("process %d still exists (kill 0: %v); it must be killed and reaped", pid, err)
	}
	if l.endedCount() != 1 {
		t.Fatalf("Ended ran %d times, want 1", l.endedCount())
	}
}

// TestStartPipedMissingCommand: a command not found is exec.ErrNotFound,
// and Ended runs (nothing was started).
func TestStartPipedMissingCommand(t *testing.T) {
	l := newFakeLaunch()
	_, err := NewSpawner().StartPiped(command(l, "warren-no-such-command-here"))
	if !errors.Is(err, exec.ErrNotFound) {
		t.Fatalf("err = %v, want exec.ErrNotFound", err)
	}
	if l.endedCount() != 1 {
		t.Fatalf("Ended ran %d times, want 1", l.endedCount())
	}
}

// TestPipedStopAndTeardown: Stop closes stdin, so a program that reads to
// EOF exits by itself within its grace; Teardown kills one that does not,
// with its group, and is idempotent. No Launch is fine.
func TestPipedStopAndTeardown(t *testing.T) {
	sp := NewSpawner()
	p, err := sp.StartPiped(command(nil, "cat"))
	if err != nil {
		t.Fatal(err)
	}
	p.Stop(time.Minute)
	if st := p.State(); st == nil || !st.Exited() || st.ExitCode() != 0 {
		t.Fatalf("cat after Stop: %v, want a clean exit on EOF", st)
	}

	q, err := sp.StartPiped(command(nil, "sh", "-c", "sleep 600 & echo $!; wait"))
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(q.Stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	grandchild, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	q.Teardown()
	q.Teardown()
	select {
	case <-q.Exited():
	default:
		t.Fatal("Teardown returned before the process was reaped")
	}
	waitGone(t, grandchild) // killed with the group
}
