package tests

import (
	"bufio"
	"errors"
	"fmt"
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

// TestAnsweredControlConnectionsCannotLockOutControl (D4): 300 native
// connections that each get one daemon.status answered and stay open take
// every slot and then every reserved place the old way; the daemon gives
// a reserved place back as soon as its request is answered (and closes
// that connection), so every one of them is answered and `daemon status`
// and `daemon stop` still work.
func TestAnsweredControlConnectionsCannotLockOutControl(t *testing.T) {
	t.Parallel()
	d := startTestDaemon(t, modeBinary)
	const flood = 300
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	var refused []string
	for i := 0; i < flood; i++ {
		c, err := net.Dial("unix", d.Sock)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		conns = append(conns, c)
		_ = c.SetDeadline(time.Now().Add(time.Minute))
		req, _ := protocol.EncodeNativeRequest(&protocol.Request{ID: int64(i), Method: "daemon.status"})
		if _, err := c.Write(req); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		b, err := protocol.ReadNativeFrame(bufio.NewReader(c), protocol.MaxFrame)
		if err != nil { // refused without a reply
			refused = append(refused, fmt.Sprintf("%d: %v", i, err))
			continue
		}
		f, err := protocol.DecodeNativeFrame(b)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		if f.Kind != protocol.KindResult {
			refused = append(refused, fmt.Sprintf("%d: %v", i, f.Error))
		}
	}
	runCLI(t, d.Home, "--json", "daemon", "status").want(t, 0, fmt.Sprintf("daemon status after %d answered status connections left open", flood))
	if len(refused) > 0 {
		t.Fatalf("%d of %d sequential daemon.status connections were refused, first: %s", len(refused), flood, refused[0])
	}
	// Connections past the slots were served on a reserved place and
	// closed by the daemon once answered.
	for i, c := range conns[server.DefaultMaxConns:] {
		_ = c.SetReadDeadline(time.Now().Add(time.Minute))
		if n, err := c.Read(make([]byte, 1)); n != 0 || (err != io.EOF && !errors.Is(err, syscall.ECONNRESET)) {
			t.Fatalf("connection %d, answered on a reserved place, was left open: n=%d err=%v", server.DefaultMaxConns+i, n, err)
		}
	}
	runCLI(t, d.Home, "daemon", "stop").want(t, 0, "daemon stop after the flood")
	select {
	case <-d.Exited():
	case <-time.After(procReadyDeadline):
		t.Fatal("the daemon did not exit after daemon stop")
	}
}

// TestDaemonStopSignalsWhenTheSocketFails (D4): when the socket is gone
// (a /tmp cleaner removed it) or the daemon does not answer (stopped
// with SIGSTOP), `warren daemon stop` makes sure the pid in daemon.pid is
// the daemon holding the home's lock and stops it with SIGTERM: a
// graceful stop, in the daemon's own log.
func TestDaemonStopSignalsWhenTheSocketFails(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		breakIt func(d *testDaemon)
		want    string
	}{
		{"socket removed", func(d *testDaemon) {
			if err := os.Remove(d.Sock); err != nil {
				t.Fatal(err)
			}
		}, "no socket"},
		{"daemon not answering", func(d *testDaemon) { d.Signal(syscall.SIGSTOP) }, "no answer within"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := startTestDaemon(t, modeBinary)
			tc.breakIt(d)
			r := runCLI(t, d.Home, "daemon", "stop").want(t, 0, "daemon stop with "+tc.name)
			if !strings.Contains(r.stderr, "sent SIGTERM") || !strings.Contains(r.stderr, tc.want) ||
				!strings.Contains(r.stdout, fmt.Sprintf("daemon stopped (pid %d)", d.Pid())) {
				t.Fatalf("daemon stop:\nstdout: %s\nstderr: %s", r.stdout, r.stderr)
			}
			select {
			case <-d.Exited():
			case <-time.After(procReadyDeadline):
				t.Fatal("the daemon did not exit")
			}
			if err := d.exitErr(); err != nil {
				t.Fatalf("the daemon did not stop gracefully: %v\n%s", err, d.Output())
			}
			if out := d.Output(); !strings.Contains(out, "stopped") {
				t.Fatalf("no graceful stop in the daemon's log:\n%s", out)
			}
		})
	}
}

// TestDaemonStopSignalsOnlyTheDaemon: the fallback signal goes only to
// the process the kernel lists as the holder of the home's lock: a
// daemon.pid naming another process (here a sleep of the test's, same
// uid) gets nothing, with an error that says so; with no lock held,
// stop says the daemon is not running, as before.
func TestDaemonStopSignalsOnlyTheDaemon(t *testing.T) {
	t.Parallel()
	d := startTestDaemon(t, modeBinary)
	victim := exec.Command("sleep", "600")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	victimDone := make(chan struct{})
	go func() { _ = victim.Wait(); close(victimDone) }()
	t.Cleanup(func() { _ = victim.Process.Kill(); <-victimDone })
	pidFile := filepath.Join(d.Home, "daemon.pid")
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(victim.Process.Pid)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(d.Sock); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, d.Home, "daemon", "stop").want(t, 1, "daemon stop with daemon.pid naming another process")
	if !strings.Contains(r.stderr, "nothing was") || !strings.Contains(r.stderr, "no holder") {
		t.Fatalf("daemon stop: %s", r.stderr)
	}
	select {
	case <-victimDone:
		t.Fatal("the process named by a forged daemon.pid was signalled")
	case <-d.Exited():
		t.Fatal("the daemon stopped although its pid file named another process")
	default:
	}
	// The real pid back: the fallback stops the daemon.
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(d.Pid())+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	runCLI(t, d.Home, "daemon", "stop").want(t, 0, "daemon stop through the fallback")
	<-d.Exited()
	r = runCLI(t, d.Home, "daemon", "stop").want(t, 3, "daemon stop with no daemon")
	if !strings.Contains(r.stderr, "not running") {
		t.Fatalf("daemon stop with no daemon: %s", r.stderr)
	}
	select {
	case <-victimDone:
		t.Fatal("the sleep was signalled")
	default:
	}
}
