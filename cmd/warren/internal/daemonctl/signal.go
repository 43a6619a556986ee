package daemonctl

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/warren-dev/warren/cmd/warren/internal/client"
	"github.com/warren-dev/warren/cmd/warren/internal/exit"
	"github.com/warren-dev/warren/cmd/warren/internal/reply"
	"github.com/warren-dev/warren/homedir"
	"github.com/warren-dev/warren/protocol"
)

// The stop's fallback (SPEC 8.1: the owner can always stop the daemon).
// When the socket refuses (no socket, nobody accepting, the connection
// limit) or does not answer within answerWait, `warren daemon stop` sends
// SIGTERM (then SIGCONT, for a stopped process) to the pid in
// <home>/daemon.pid, the same graceful stop as daemon.shutdown, but only
// once it has made sure that pid is this home's daemon:
//
//   - <home>/daemon.lock is held: a non-blocking flock on it fails (a lock
//     nobody holds means no daemon: the socket's error stands);
//   - the kernel names that pid as the lock's holder (/proc/locks, for the
//     lock file's device and inode), so a daemon.pid naming any other
//     process is refused;
//   - the process runs as the user's uid (/proc/PID/status);
//   - its executable is this warren binary (/proc/PID/exe is the same file
//     as os.Executable).
//
// The pid is pinned (os.FindProcess holds a pidfd on Linux) before the
// checks, so the signal cannot reach a process that reused the number
// meanwhile. Any failed check signals nothing and says what to do.

// answerWait bounds how long stop waits for the socket to answer a request
// before it falls back to the signal.
const answerWait = 5 * time.Second

// unanswered reports whether err means the daemon's socket refused or did
// not answer (the cases the signal fallback is for), as opposed to a
// daemon that answered with an error, a socket warren will not use (not a
// socket, another user's) or the user's interruption.
func unanswered(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var ee *exit.Error
	if errors.As(err, &ee) && ee.Code == exit.NotRunning {
		return true
	}
	if client.Refused(err) {
		return false
	}
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe.Code == protocol.CodeUnavailable // the connection limit
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, protocol.ErrClientClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNREFUSED)
}

// refusedOrLate reports whether a request on a live socket was refused
// for the connection limit or not answered in time.
func refusedOrLate(ctx context.Context, err error) bool {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe.Code == protocol.CodeUnavailable
	}
	return ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded)
}

// callInTime makes one call bounded by answerWait.
func (d *Ctl) callInTime(ctx context.Context, method string, params map[string]any) (map[string]any, error) {
	cctx, cancel := context.WithTimeout(ctx, answerWait)
	defer cancel()
	return d.Daemon.Call(cctx, method, params)
}

// stopBySignal is Stop's fallback after the socket failed with cause: it
// finds the daemon holding the home's lock, sends it SIGTERM and waits
// until it has exited. With no daemon holding the lock it returns cause.
func (d *Ctl) stopBySignal(ctx context.Context, cause error) error {
	proc, err := lockHolder(d.Home)
	if errors.Is(err, errNoDaemon) {
		return cause
	}
	if err != nil {
		return exit.Failf("the daemon's socket did not answer (%v), and nothing was signalled: %v", causeText(cause), err)
	}
	pid := proc.Pid
	if err := proc.Signal(syscall.SIGTERM); err != nil {
		if errors.Is(err, os.ErrProcessDone) {
			return d.stoppedBySignal(pid)
		}
		return exit.Failf("the daemon's socket did not answer (%v), and sending SIGTERM to the daemon (pid %d) failed: %v", causeText(cause), pid, err)
	}
	_ = proc.Signal(syscall.SIGCONT) // a stopped daemon must run to stop
	fmt.Fprintf(d.Stderr, "the daemon's socket did not answer (%s); sent SIGTERM to the daemon (pid %d), which holds %s\n",
		causeText(cause), pid, homedir.LockPath(d.Home))
	deadline := time.NewTimer(stopDeadline)
	defer deadline.Stop()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	// Polled: a process that is not our child gives no event when it ends.
	for !errors.Is(proc.Signal(syscall.Signal(0)), os.ErrProcessDone) {
		select {
		case <-deadline.C:
			return exit.Failf("the daemon (pid %d) got SIGTERM but is still running after %s; if it must stop now: kill -KILL %d", pid, stopDeadline, pid)
		case <-ctx.Done():
			return &exit.Error{Code: exit.DaemonErr, Msg: "interrupted while waiting for the daemon to stop"}
		case <-tick.C:
		}
	}
	return d.stoppedBySignal(pid)
}

func (d *Ctl) stoppedBySignal(pid int) error {
	if d.JSON {
		return reply.JSON(d.Stdout, map[string]any{"pid": pid, "signal": "SIGTERM", "status": "stopped"})
	}
	fmt.Fprintf(d.Stdout, "daemon stopped (pid %d)\n", pid)
	return nil
}

// causeText is the short form of the socket's failure.
func causeText(err error) string {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe.Message
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("no answer within %s", answerWait)
	}
	return err.Error()
}

// errNoDaemon: nobody holds the home's lock.
var errNoDaemon = errors.New("no daemon holds the home's lock")

// lockHolder returns the daemon of home, pinned, after the checks listed
// above; errNoDaemon when nobody holds the lock.
func lockHolder(home string) (*os.Process, error) {
	lockPath := homedir.LockPath(home)
	f, err := os.OpenFile(lockPath, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, errNoDaemon
	}
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", lockPath, err)
	}
	defer f.Close()
	switch err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); {
	case err == nil:
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return nil, errNoDaemon
	case !errors.Is(err, syscall.EWOULDBLOCK):
		return nil, fmt.Errorf("testing the lock %s: %w", lockPath, err)
	}
	pidPath := homedir.PidPath(home)
	b, err := os.ReadFile(pidPath)
	if err != nil {
		return nil, fmt.Errorf("the lock %s is held, but its holder's pid file cannot be read: %w; find the holder with: fuser %s", lockPath, err, lockPath)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return nil, fmt.Errorf("the lock %s is held, but %s holds %q, not a pid; find the holder with: fuser %s", lockPath, pidPath, strings.TrimSpace(string(b)), lockPath)
	}
	proc, err := os.FindProcess(pid) // a pidfd: the checks and the signal are about one process
	if err != nil {
		return nil, fmt.Errorf("pid %d (from %s): %w", pid, pidPath, err)
	}
	if err := checkDaemonProcess(f, pid); err != nil {
		proc.Release()
		return nil, fmt.Errorf("pid %d (from %s) is not this home's daemon: %w; nothing was done to it. Find the lock's holder with: fuser %s", pid, pidPath, err, lockPath)
	}
	return proc, nil
}

// checkDaemonProcess checks that pid holds the lock open as f, runs as
// the user's uid and runs this binary.
func checkDaemonProcess(f *os.File, pid int) error {
	holders, err := flockHolders(f)
	if err != nil {
		return err
	}
	if !holders[pid] {
		return fmt.Errorf("the kernel lists it as no holder of %s (holders: %s)", f.Name(), pidList(holders))
	}
	uid, err := procUID(pid)
	if err != nil {
		return err
	}
	if uid != os.Getuid() {
		return fmt.Errorf("it runs as uid %d, not as you (uid %d)", uid, os.Getuid())
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this program's executable: %w", err)
	}
	mine, err := os.Stat(self)
	if err != nil {
		return fmt.Errorf("finding this program's executable: %w", err)
	}
	exe := fmt.Sprintf("/proc/%d/exe", pid)
	theirs, err := os.Stat(exe)
	if err != nil {
		return fmt.Errorf("reading its executable: %w", err)
	}
	if !os.SameFile(mine, theirs) {
		target, _ := os.Readlink(exe)
		return fmt.Errorf("it runs %s, not this warren binary (%s); if it is a daemon of another warren build, stop it with that build or with: kill %d", target, self, pid)
	}
	return nil
}

// flockHolders returns the pids /proc/locks lists as holding a flock on
// the file f is open on (blocked waiters, "->" lines, are not holders).
func flockHolders(f *os.File) (map[int]bool, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil, fmt.Errorf("no device and inode for %s", f.Name())
	}
	dev := uint64(st.Dev)
	major := (dev>>8)&0xfff | (dev>>32)&^uint64(0xfff)
	minor := dev&0xff | (dev>>12)&^uint64(0xff)
	want := fmt.Sprintf("%02x:%02x:%d", major, minor, st.Ino)
	locks, err := os.Open("/proc/locks")
	if err != nil {
		return nil, fmt.Errorf("reading the kernel's lock table: %w", err)
	}
	defer locks.Close()
	holders := map[int]bool{}
	sc := bufio.NewScanner(locks)
	for sc.Scan() {
		// "1: FLOCK  ADVISORY  WRITE 1234 fe:00:9977929 0 EOF"
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[1] != "FLOCK" || fields[5] != want {
			continue
		}
		if pid, err := strconv.Atoi(fields[4]); err == nil {
			holders[pid] = true
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the kernel's lock table: %w", err)
	}
	return holders, nil
}

// procUID is the real uid of a process.
func procUID(pid int) (int, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, fmt.Errorf("reading its status: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				return strconv.Atoi(f[0])
			}
		}
	}
	return 0, errors.New("its status has no Uid line")
}

func pidList(m map[int]bool) string {
	if len(m) == 0 {
		return "none listed"
	}
	var s []string
	for p := range m {
		s = append(s, strconv.Itoa(p))
	}
	return strings.Join(s, ", ")
}
