package acp

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warren-dev/warren/agentproc"
	"github.com/warren-dev/warren/provider"
)

// fakeAgentBin is the fake ACP agent, built once for the package's tests.
var fakeAgentBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "acptest")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fakeAgentBin = filepath.Join(dir, "fakeagent")
	cmd := exec.Command("go", "build", "-o", fakeAgentBin, "./internal/fakeagent")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the fake agent:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// env is one test's fake agent setup.
type env struct {
	t      *testing.T
	state  string
	logf   string
	vars   []string
	st     Settings
	opts   Options
	launch *fakeLauncher
	cwd    string // the agents' working directory
}

func newEnv(t *testing.T, vars ...string) *env {
	dir := t.TempDir()
	e := &env{t: t, state: filepath.Join(dir, "state"), logf: filepath.Join(dir, "agent.log"), launch: &fakeLauncher{},
		cwd: t.TempDir()}
	if err := os.Mkdir(e.state, 0o700); err != nil {
		t.Fatal(err)
	}
	e.vars = append([]string{"FAKEACP_STATE=" + e.state, "FAKEACP_LOG=" + e.logf}, vars...)
	e.st = Settings{Command: []string{fakeAgentBin}}
	e.opts = Options{Name: "fake", WarrenBinary: fakeAgentBin, Spawner: sharedSpawner, CancelGrace: 5 * time.Second}
	return e
}

var sharedSpawner = agentproc.NewSpawner()

func (e *env) provider() *Provider {
	o := e.opts
	st := e.st
	o.Settings = func() Settings { return st }
	return New(o)
}

func (e *env) spec() provider.Spec {
	return provider.Spec{AgentID: "a1", Env: append([]string{provider.EnvSocket + "=/tmp/warren-test.sock"}, e.vars...),
		Launcher: e.launch, Cwd: e.cwd}
}

func (e *env) create() *Session {
	e.t.Helper()
	s, err := e.provider().Create(context.Background(), e.spec())
	if err != nil {
		e.t.Fatalf("Create: %v", err)
	}
	e.t.Cleanup(func() { _ = s.(*Session).Stop() })
	return s.(*Session)
}

// received returns the messages the fake agent logged, by method.
func (e *env) received(method string) []map[string]any {
	e.t.Helper()
	f, err := os.Open(e.logf)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["method"] == method {
			out = append(out, m)
		}
	}
	return out
}

// fakeLauncher issues a credential per process and records starts and ends.
type fakeLauncher struct {
	mu      sync.Mutex
	n       int
	started []int
	ended   int
	stderr  syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func (l *fakeLauncher) Prepare() (provider.Launch, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	return &fakeLaunch{l: l, cred: fmt.Sprintf("cred-%d", l.n)}, nil
}

type fakeLaunch struct {
	l    *fakeLauncher
	cred string
}

// Stderr is the per-agent stderr file's writer (the daemon's Launch has
// one).
func (f *fakeLaunch) Stderr() io.Writer { return &f.l.stderr }

func (f *fakeLaunch) Env() []string                                                 { return []string{provider.EnvCredential + "=" + f.cred} }
func (f *fakeLaunch) Command(argv []string, _ string, _ []string) ([]string, error) { return argv, nil }

func (f *fakeLaunch) Started(pid int) error {
	f.l.mu.Lock()
	f.l.started = append(f.l.started, pid)
	f.l.mu.Unlock()
	return nil
}
func (f *fakeLaunch) Ended() {
	f.l.mu.Lock()
	f.l.ended++
	f.l.mu.Unlock()
}

// chunks collects streamed text.
type chunks struct {
	mu   sync.Mutex
	list []string
	// first is closed at the first chunk.
	first     chan struct{}
	firstOnce sync.Once
}

func newChunks() *chunks { return &chunks{first: make(chan struct{})} }

func (c *chunks) add(s string) {
	c.mu.Lock()
	c.list = append(c.list, s)
	c.mu.Unlock()
	c.firstOnce.Do(func() { close(c.first) })
}

func (c *chunks) text() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.list, "")
}

// fakeTools is a fake ToolCaller.
type fakeTools struct {
	mu    sync.Mutex
	calls []map[string]any
	fn    func(tool string, args map[string]any) (map[string]any, error)
}

func (f *fakeTools) CallTool(_ context.Context, tool string, args map[string]any) (map[string]any, error) {
	f.mu.Lock()
	f.calls = append(f.calls, map[string]any{"tool": tool, "args": args})
	f.mu.Unlock()
	return f.fn(tool, args)
}

func send(t *testing.T, s *Session, prompt string) (string, *chunks) {
	t.Helper()
	c := newChunks()
	resp, err := s.Send(context.Background(), prompt, provider.TurnIO{OnChunk: c.add})
	if err != nil {
		t.Fatalf("Send(%q): %v", prompt, err)
	}
	return resp, c
}

// groupGone waits until no live (non-zombie) process is left in process
// group pgid; SIGKILL has been sent to the group, so this is the signal's
// delivery, bounded to fail rather than hang.
func groupGone(t *testing.T, pgid int) {
	t.Helper()
	if pgid <= 0 {
		t.Fatalf("bad process group %d", pgid)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		live := liveInGroup(pgid)
		if len(live) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process group %d still has live processes %v", pgid, live)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// liveInGroup lists the processes of group pgid that are not zombies.
func liveInGroup(pgid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(data)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		var state string
		var ppid, pgrp int
		if _, err := fmt.Sscan(s[i+1:], &state, &ppid, &pgrp); err != nil {
			continue
		}
		if pgrp == pgid && state != "Z" {
			out = append(out, pid)
		}
	}
	return out
}
