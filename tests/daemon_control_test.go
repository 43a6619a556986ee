package tests

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warren-dev/warren/protocol"
	"github.com/warren-dev/warren/server"
)

// TestConnectionFloodCannotLockOutControl: connections that send nothing
// hold no slot, so `daemon status` answers while hundreds of them are
// open, and the daemon closes them at the first-byte deadline (seconds,
// not the idle hour). With every slot taken by live connections, status
// and stop still get through the control reserve while other methods are
// refused.
func TestConnectionFloodCannotLockOutControl(t *testing.T) {
	t.Parallel()
	d := startTestDaemon(t, modeBinary)
	var silent []net.Conn
	defer func() {
		for _, c := range silent {
			c.Close()
		}
	}()
	for i := 0; i < server.DefaultMaxConns+44; i++ {
		c, err := net.Dial("unix", d.Sock)
		if err != nil {
			t.Fatalf("silent connection %d: %v", i, err)
		}
		silent = append(silent, c)
	}
	runCLI(t, d.Home, "--json", "daemon", "status").want(t, 0, "daemon status under a flood of silent connections")
	// The daemon closes a silent connection at the first-byte deadline.
	_ = silent[0].SetReadDeadline(time.Now().Add(time.Minute))
	if n, err := silent[0].Read(make([]byte, 1)); n != 0 || (err != io.EOF && !errors.Is(err, syscall.ECONNRESET)) {
		t.Fatalf("a connection that sent nothing was not closed by the daemon: n=%d err=%v", n, err)
	}

	// Fill every slot with live connections (each proven admitted by a
	// reply it got, and kept open).
	var live []net.Conn
	defer func() {
		for _, c := range live {
			c.Close()
		}
	}()
	for i := 0; i < server.DefaultMaxConns; i++ {
		c, err := net.Dial("unix", d.Sock)
		if err != nil {
			t.Fatalf("live connection %d: %v", i, err)
		}
		live = append(live, c)
		_ = c.SetDeadline(time.Now().Add(time.Minute))
		req, _ := protocol.EncodeNativeRequest(&protocol.Request{ID: int64(i), Method: "daemon.status"})
		if _, err := c.Write(req); err != nil {
			t.Fatal(err)
		}
		if _, err := protocol.ReadNativeFrame(bufio.NewReader(c), protocol.MaxFrame); err != nil {
			t.Fatalf("live connection %d: %v", i, err)
		}
	}
	r := runCLI(t, d.Home, "agent", "list")
	r.want(t, 1, "agent list with every slot taken")
	if !strings.Contains(r.stderr, "too many connections") {
		t.Fatalf("agent list: %s", r.stderr)
	}
	runCLI(t, d.Home, "--json", "daemon", "status").want(t, 0, "daemon status with every slot taken")
	runCLI(t, d.Home, "daemon", "stop").want(t, 0, "daemon stop with every slot taken")
	select {
	case <-d.Exited():
	case <-time.After(procReadyDeadline):
		t.Fatal("the daemon did not exit after daemon stop")
	}
}

// TestDaemonStopNeverStopsAnotherHome: a daemon.sock that leads to the
// daemon of another home (a hard link to its socket, or a symbolic link)
// does not make `daemon stop` stop that daemon.
func TestDaemonStopNeverStopsAnotherHome(t *testing.T) {
	t.Parallel()
	d := startTestDaemon(t, modeBinary)
	_, linked := newHomeDir(t)
	if err := os.Mkdir(linked, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(d.Sock, filepath.Join(linked, "daemon.sock")); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, linked, "daemon", "stop")
	r.want(t, 1, "daemon stop through a hard link to another home's socket")
	if !strings.Contains(r.stderr, "serves another home") || !strings.Contains(r.stderr, d.Home) {
		t.Fatalf("stop: %s", r.stderr)
	}
	// Status does not present that daemon as this home's either.
	r = runCLI(t, linked, "daemon", "status")
	r.want(t, 1, "daemon status through a hard link to another home's socket")
	if !strings.Contains(r.stderr, "serves another home") {
		t.Fatalf("status: %s", r.stderr)
	}
	_, symlinked := newHomeDir(t)
	if err := os.Mkdir(symlinked, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(d.Sock, filepath.Join(symlinked, "daemon.sock")); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, symlinked, "daemon", "stop")
	r.want(t, 1, "daemon stop through a symbolic link to another home's socket")
	if !strings.Contains(r.stderr, "not a socket") {
		t.Fatalf("stop: %s", r.stderr)
	}
	// The daemon itself refuses a shutdown for another home.
	_, err := d.Client().Call(procCtx(t), "daemon.shutdown", map[string]any{"home": linked})
	wantCode(t, "daemon.shutdown for another home", err, protocol.CodeInvalid)
	select {
	case <-d.Exited():
		t.Fatalf("the daemon of %s was stopped through another home", d.Home)
	default:
	}
	d.callN("daemon.status", nil)
	// Its own home stops it.
	runCLI(t, d.Home, "daemon", "stop").want(t, 0, "daemon stop on its own home")
}

// TestDaemonLogSymlinkNotFollowed: a symbolic link at daemon.log is an
// error; its target is never written.
func TestDaemonLogSymlinkNotFollowed(t *testing.T) {
	t.Parallel()
	dir, home := newHomeDir(t)
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("keep me\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(home, "daemon.log")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := os.Lstat(filepath.Join(home, "daemon.sock")); err == nil {
			runCLI(t, home, "daemon", "stop")
		}
	})
	r := runCLI(t, home, "daemon", "start")
	r.want(t, 1, "daemon start with daemon.log a symbolic link")
	if !strings.Contains(r.stderr, "symbolic link") {
		t.Fatalf("start: %s", r.stderr)
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != "keep me\n" {
		t.Fatalf("the link's target was written: %q %v", b, err)
	}
}

// TestDaemonStartWaitsForSlowStart: `daemon start` waits for a daemon that
// takes long to come up (here: blocked reading config.json, a FIFO the
// test holds), printing progress on stderr, and reports success once it
// serves instead of giving up.
func TestDaemonStartWaitsForSlowStart(t *testing.T) {
	t.Parallel()
	if procBuildErr != nil {
		t.Fatal(procBuildErr)
	}
	_, home := newHomeDir(t)
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(home, "config.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(procBinary, "--home", home, "daemon", "start")
	var stdout lockedBuffer
	cmd.Stdout = &stdout
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The daemon's config watcher may be blocked on the FIFO: kill it.
		if b, err := os.ReadFile(filepath.Join(home, "daemon.pid")); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	sc := bufio.NewScanner(stderr)
	var seen strings.Builder
	progress := false
	for !progress && sc.Scan() {
		seen.WriteString(sc.Text() + "\n")
		progress = strings.Contains(sc.Text(), "waiting for the daemon")
	}
	if !progress {
		_ = cmd.Wait()
		t.Fatalf("daemon start ended without progress while the daemon was starting:\nstderr: %s\nstdout: %s", seen.String(), stdout.String())
	}
	// Let the daemon go on.
	f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.Write([]byte("{}"))
	f.Close()
	go func() { _, _ = io.Copy(io.Discard, stderr) }()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("daemon start: %v\nstdout: %s", err, stdout.String())
	}
	if !strings.Contains(stdout.String(), "daemon started") {
		t.Fatalf("stdout: %s", stdout.String())
	}
}
