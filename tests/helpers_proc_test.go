package tests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/warren-dev/warren/homedir"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/builtins"
	"github.com/warren-dev/warren/daemon"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/protocol"
	"github.com/warren-dev/warren/provider/scripted"
)

// procBinary is the warren binary built once by TestMain; procBuildErr says
// why it is missing when the build failed (tests that need it fail with it).
var (
	procBinary   string
	procBuildErr error
	// procPython is the real Python interpreter (python3 on PATH may be a
	// slow wrapper such as a pyenv shim); the test agent script names it in
	// its #! line.
	procPython string
)

// procReadyDeadline bounds how long a daemon may take to answer after start.
const procReadyDeadline = 30 * time.Second

func TestMain(m *testing.M) {
	if sock := os.Getenv(fakeServerEnv); sock != "" {
		os.Exit(runFakeServer(sock)) // this process is a helper, not the tests
	}
	if spec := os.Getenv(natsHelperEnv); spec != "" {
		os.Exit(runNATSHelper(spec)) // a NATS server of a cluster test
	}
	dir, err := os.MkdirTemp("", "wbin")
	if err != nil {
		fmt.Fprintln(os.Stderr, "tests: temp dir for the binary:", err)
		os.Exit(1)
	}
	procBinary = filepath.Join(dir, "warren")
	out, err := exec.Command("go", "build", "-o", procBinary, "github.com/warren-dev/warren/cmd/warren").CombinedOutput()
	if err != nil {
		procBuildErr = fmt.Errorf("go build ./cmd/warren: %w\n%s", err, out)
	}
	procPython = "/usr/bin/env python3"
	if out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output(); err == nil {
		if p := strings.TrimSpace(string(out)); p != "" && !strings.ContainsAny(p, " \t") {
			procPython = p
		}
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// procMode says how a test daemon runs.
type procMode string

const (
	modeInProcess procMode = "inprocess" // daemon.Run in this test process
	modeBinary    procMode = "binary"    // the built binary, a subprocess
)

var procModes = []procMode{modeInProcess, modeBinary}

// testDaemon is one daemon on one home, started and stopped by a test. It
// can be restarted on the same home (after Kill or Stop).
type testDaemon struct {
	t    testing.TB
	mode procMode
	Home string
	Sock string
	dir  string // parent of Home: scripts, stderr files

	mu     sync.Mutex
	cmd    *exec.Cmd     // binary mode
	exited chan struct{} // closed when the current run ended
	runErr error         // how it ended
	cancel func()        // in-process mode
	stderr *lockedBuffer // output of the current run
	client *protocol.Client
	starts int
	// args are more flags for `daemon start` (binary mode), e.g. a cluster.
	args []string
	// shell, when set, is run by sh before it execs the binary (binary
	// mode), e.g. "ulimit -Sn 100 && ulimit -Hn 300".
	shell string
	// readyWait bounds a start (0: procReadyDeadline).
	readyWait time.Duration
	// readLogs reads every agent's log for verifyAfterRestart (nil: the
	// files under Home, readAllLogs).
	readLogs func(round int) map[string][]eventlog.Entry
}

// lockedBuffer is a goroutine-safe bytes.Buffer for daemon output.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// newTestDaemon makes a fresh short home (socket paths are limited to 107
// bytes) without starting anything.
func newTestDaemon(t testing.TB, mode procMode) *testDaemon {
	t.Helper()
	if mode == modeBinary && procBuildErr != nil {
		t.Fatal(procBuildErr)
	}
	dir, err := os.MkdirTemp("", "w")
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "h")
	d := &testDaemon{t: t, mode: mode, Home: home, Sock: homedir.SocketPath(home), dir: dir}
	t.Cleanup(func() {
		d.stopQuietly()
		_ = os.RemoveAll(dir)
	})
	return d
}

// startTestDaemon makes a home and starts a daemon on it.
func startTestDaemon(t testing.TB, mode procMode) *testDaemon {
	t.Helper()
	d := newTestDaemon(t, mode)
	d.Start()
	return d
}

// Start starts the daemon and returns once it answers daemon.status.
func (d *testDaemon) Start() {
	d.t.Helper()
	if err := d.start(); err != nil {
		d.t.Fatal(err)
	}
}

func (d *testDaemon) start() error {
	exited, err := d.launch()
	if err != nil {
		return err
	}
	return d.waitReady(exited)
}

// launch starts the daemon without waiting for it to serve (a cluster
// daemon standing by does not); exited is closed when the run ends.
func (d *testDaemon) launch() (exited chan struct{}, err error) {
	d.dropClient() // a client of an earlier run is dead
	d.mu.Lock()
	d.starts++
	out := &lockedBuffer{}
	d.stderr = out
	exited = make(chan struct{})
	d.exited = exited
	d.runErr = nil
	d.mu.Unlock()
	switch d.mode {
	case modeInProcess:
		ctx, cancel := context.WithCancel(context.Background())
		logger := hclog.New(&hclog.LoggerOptions{Name: "warren", Level: hclog.Debug, Output: out})
		d.mu.Lock()
		d.cancel = cancel
		d.mu.Unlock()
		go func() {
			err := daemon.Run(ctx, daemon.Options{Home: d.Home, Logger: logger, Version: "test", Providers: builtins.Providers,
				DefaultProvider: builtins.DefaultProvider})
			d.mu.Lock()
			d.runErr = err
			d.mu.Unlock()
			close(exited)
		}()
	case modeBinary:
		argv := append([]string{procBinary, "daemon", "start", "--foreground", "--log-level", "debug", "--home", d.Home}, d.args...)
		if d.shell != "" {
			argv = append([]string{"sh", "-c", d.shell + ` && exec "$0" "$@"`}, argv...)
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stdout = out
		cmd.Stderr = out
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("starting %s: %w", procBinary, err)
		}
		d.mu.Lock()
		d.cmd = cmd
		d.mu.Unlock()
		go func() {
			err := cmd.Wait()
			d.mu.Lock()
			d.runErr = err
			d.mu.Unlock()
			close(exited)
		}()
	}
	return exited, nil
}

// waitReady polls daemon.status until the daemon answers, it exits, or
// procReadyDeadline passes.
func (d *testDaemon) waitReady(exited chan struct{}) error {
	wait := procReadyDeadline
	if d.readyWait > 0 {
		wait = d.readyWait
	}
	deadline := time.Now().Add(wait)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := protocol.CallJSON(ctx, d.Sock, "daemon.status", nil)
		cancel()
		if cl, _ := st["cluster"].(map[string]any); err == nil && cl["role"] != "standby" {
			return nil // serving (a cluster daemon standing by answers too)
		}
		select {
		case <-exited:
			return fmt.Errorf("daemon (%s) exited before serving: %v\noutput:\n%s%s", d.mode, d.exitErr(), d.Output(), lockHolders(d.Home))
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("daemon (%s) did not answer within %v: %v\noutput:\n%s", d.mode, wait, err, d.Output())
		}
		time.Sleep(10 * time.Millisecond) // polling the socket: no signal exists for "accepting"
	}
}

// Output is what the current (or last) run wrote to its log.
func (d *testDaemon) Output() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stderr == nil {
		return ""
	}
	return d.stderr.String()
}

func (d *testDaemon) exitErr() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.runErr
}

// Exited is closed when the current run ends.
func (d *testDaemon) Exited() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.exited
}

// Pid is the daemon's process id (the test process in-process).
func (d *testDaemon) Pid() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mode == modeBinary && d.cmd != nil {
		return d.cmd.Process.Pid
	}
	return os.Getpid()
}

// Client returns a native client shared by the test (reconnected after a
// restart).
func (d *testDaemon) Client() *protocol.Client {
	d.t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.client != nil {
		return d.client
	}
	c, err := protocol.Dial(context.Background(), d.Sock)
	if err != nil {
		d.t.Fatal(err)
	}
	d.client = c
	return c
}

func (d *testDaemon) dropClient() {
	d.mu.Lock()
	c := d.client
	d.client = nil
	d.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
}

// Kill sends SIGKILL to the binary and waits for it to die. In-process
// mode has no process to kill: this is a test bug.
func (d *testDaemon) Kill() {
	d.t.Helper()
	if d.mode != modeBinary {
		d.t.Fatal("Kill needs the binary mode")
	}
	d.dropClient()
	d.mu.Lock()
	cmd, exited := d.cmd, d.exited
	d.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
	if waitLockAfterKill {
		d.waitLockFree()
	}
}

// waitLockFree waits until nothing holds the home's daemon.lock. After a
// SIGKILL the flock can outlive the reaped daemon for 10-100 ms (the
// kernel releases a flock at the last fput, which it may defer), and a
// restart in that window fails with "already running". That is reported
// as a daemon bug (see socket_bugs_test.go, whose build sets
// waitLockAfterKill false to reproduce it).
func (d *testDaemon) waitLockFree() {
	d.t.Helper()
	f, err := os.OpenFile(filepath.Join(d.Home, "daemon.lock"), os.O_RDWR, 0)
	if err != nil {
		return // no lock file: nothing to wait for
	}
	defer f.Close()
	start := time.Now()
	deadline := start.Add(procReadyDeadline)
	for tries := 0; ; tries++ {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
			if tries > 0 {
				d.t.Logf("daemon.lock was still held %v after the killed daemon was reaped", time.Since(start))
			}
			return
		}
		if tries == 0 {
			d.t.Logf("daemon.lock held after the kill: %s", lockHolders(d.Home))
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("daemon.lock still held %v after the daemon was killed:\n%s", procReadyDeadline, lockHolders(d.Home))
		}
		time.Sleep(time.Millisecond) // no signal for "another process released a flock"
	}
}

// Signal sends sig to the binary.
func (d *testDaemon) Signal(sig os.Signal) {
	d.t.Helper()
	d.mu.Lock()
	cmd := d.cmd
	d.mu.Unlock()
	if err := cmd.Process.Signal(sig); err != nil {
		d.t.Fatal(err)
	}
}

// Stop stops the daemon gracefully (SIGTERM, or the context in-process)
// and returns how the run ended.
func (d *testDaemon) Stop() error {
	d.dropClient()
	d.mu.Lock()
	cmd, cancel, exited := d.cmd, d.cancel, d.exited
	d.mu.Unlock()
	if exited == nil {
		return nil
	}
	select {
	case <-exited:
		return d.exitErr()
	default:
	}
	if d.mode == modeBinary {
		_ = cmd.Process.Signal(syscall.SIGTERM)
	} else {
		cancel()
	}
	<-exited
	err := d.exitErr()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// Restart stops the daemon gracefully and starts it again.
func (d *testDaemon) Restart() {
	d.t.Helper()
	if err := d.Stop(); err != nil {
		d.t.Fatalf("stopping the daemon: %v\n%s", err, d.Output())
	}
	d.Start()
}

func (d *testDaemon) stopQuietly() {
	d.dropClient()
	d.mu.Lock()
	cmd, cancel, exited := d.cmd, d.cancel, d.exited
	d.mu.Unlock()
	if exited == nil {
		return
	}
	select {
	case <-exited:
		return
	default:
	}
	if d.mode == modeBinary {
		_ = cmd.Process.Signal(syscall.SIGKILL)
	} else {
		cancel()
	}
	<-exited
}

// forEachMode runs f as a subtest with the daemon in-process and as the
// built binary.
func forEachMode(t *testing.T, f func(t *testing.T, mode procMode)) {
	for _, m := range procModes {
		t.Run(string(m), func(t *testing.T) { f(t, m) })
	}
}

// procCtx is a context bounded by the test's deadline, so a hung daemon
// fails the test instead of hanging it.
func procCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// callN calls a method with the native framing, failing the test on error.
func (d *testDaemon) callN(method string, params map[string]any) map[string]any {
	d.t.Helper()
	res, err := d.Client().Call(procCtx(d.t), method, params)
	if err != nil {
		d.t.Fatalf("%s %v: %v", method, params, err)
	}
	return res
}

// createAgent creates an agent and returns its id.
func (d *testDaemon) createAgent(name, prov, model, parent string) string {
	d.t.Helper()
	p := map[string]any{"name": name, "instructions": "test agent " + name, "provider": prov, "model": model}
	if parent != "" {
		p["parent"] = parent
	}
	res := d.callN("agent.create", p)
	id, _ := res["agent_id"].(string)
	if len(id) != 32 {
		d.t.Fatalf("agent.create %s: agent_id %q is not 32 hex characters", name, id)
	}
	return id
}

// wantCode fails unless err is a protocol error with the code.
func wantCode(t testing.TB, what string, err error, code int) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: succeeded, want error code %d", what, code)
	}
	var pe *protocol.Error
	if !errors.As(err, &pe) {
		t.Fatalf("%s: error %v (%T) is not a protocol error, want code %d", what, err, err, code)
	}
	if pe.Code != code {
		t.Fatalf("%s: error code %d (%q), want %d", what, pe.Code, pe.Message, code)
	}
	if pe.Message == "" {
		t.Fatalf("%s: error code %d has an empty message", what, code)
	}
}

// writeScripts installs the Python helper library and the test agent
// script in dir and returns the script's absolute path.
func writeScripts(t testing.TB, dir string) string {
	t.Helper()
	if err := scripted.WriteHelpers(dir); err != nil {
		t.Fatal(err)
	}
	// Not a .py name: the daemon executes it directly, through its #! line.
	path := filepath.Join(dir, "agent")
	if err := os.WriteFile(path, []byte("#!"+procPython+"\n"+agentScript), 0o700); err != nil {
		t.Fatal(err)
	}
	return path
}

// agentScript is the scripted test agent. The message selects the action:
//
//	ask <prompt>          await_input, then "answer: <response>" (also as
//	                      the body of a message from another agent)
//	quick <prompt>        await_input with a 1-second deadline ("no answer:
//	                      <error>" when it times out and is re-run)
//	fifo <path>           block until the FIFO at path is written and closed
//	spawn <name> [model]  spawn_agent (scripted child, or inproc <model>)
//	send <to> <text>      send_message
//	anything else         "turn <n>: <message>" (n counts this session's turns,
//	                      state that survives a restart through the history)
const agentScript = `import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from warren_script import read_turn, call_tool, done

n = 0
while True:
    msg = read_turn()
    n += 1
    words = msg.split(" ", 2)
    body = msg.split("\n", 1)[-1] if msg.startswith("Message from ") else msg
    if body.split(" ", 1)[0] == "ask":
        r = call_tool("await_input", kind="approval", prompt=body[4:] or "ok?", timeout=3600)
        done("answer: " + str(r.get("response")))
    elif words[0] == "quick":
        try:
            r = call_tool("await_input", kind="approval", prompt=msg[6:] or "ok?", timeout=1)
            done("answer: " + str(r.get("response")))
        except RuntimeError as e:
            done("no answer: " + str(e))
    elif words[0] == "fifo":
        with open(words[1]) as f:
            data = f.read()
        done("fifo: " + data)
    elif words[0] == "spawn":
        args = {"name": words[1], "instructions": "child"}
        if len(words) > 2:
            args["provider"] = "inproc"
            args["model"] = words[2]
        r = call_tool("spawn_agent", **args)
        done("spawned: " + str(r.get("agent_id", r.get("error"))))
    elif words[0] == "send" and len(words) == 3:
        r = call_tool("send_message", recipient=words[1], text=words[2])
        done("sent: " + str(r.get("message_id", r.get("error"))))
    else:
        done("turn %d: %s" % (n, msg))
`

// lockHolders lists the processes that have the home's daemon.lock open
// (read from /proc), to diagnose an unexpected "already running".
func lockHolders(home string) string {
	lock := filepath.Join(home, "daemon.lock")
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return ""
	}
	var b strings.Builder
	self := strconv.Itoa(os.Getpid())
	for _, p := range procs {
		if name := p.Name(); name == self || name == "self" || name == "thread-self" {
			continue // the test's own descriptor (waitLockFree's)
		}
		fds, err := os.ReadDir(filepath.Join("/proc", p.Name(), "fd"))
		if err != nil {
			continue
		}
		for _, fd := range fds {
			target, err := os.Readlink(filepath.Join("/proc", p.Name(), "fd", fd.Name()))
			if err != nil || target != lock {
				continue
			}
			cmdline, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
			status, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "status"))
			ppid := ""
			for _, line := range strings.Split(string(status), "\n") {
				if strings.HasPrefix(line, "PPid:") {
					ppid = strings.TrimSpace(strings.TrimPrefix(line, "PPid:"))
				}
			}
			fmt.Fprintf(&b, "lock %s held by pid %s (ppid %s, fd %s): %s\n", lock, p.Name(), ppid, fd.Name(),
				strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	return b.String()
}
