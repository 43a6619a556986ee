package scripted

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/provider"
)

// call is one tool call seen by fakeTools.
type call struct {
	Tool string
	Args map[string]any
}

// fakeTools answers tool calls through fn (default: {"ok": true}).
type fakeTools struct {
	mu    sync.Mutex
	calls []call
	fn    func(ctx context.Context, tool string, args map[string]any) (map[string]any, error)
}

func (f *fakeTools) CallTool(ctx context.Context, tool string, args map[string]any) (map[string]any, error) {
	f.mu.Lock()
	f.calls = append(f.calls, call{tool, args})
	f.mu.Unlock()
	if f.fn == nil {
		return map[string]any{"ok": true}, nil
	}
	return f.fn(ctx, tool, args)
}

func (f *fakeTools) seen() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]call(nil), f.calls...)
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// env is a test environment: a temp dir holding the Python helpers and the
// test's scripts.
type env struct {
	t    *testing.T
	dir  string
	logs *syncBuffer
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	if err := WriteHelpers(dir); err != nil {
		t.Fatalf("WriteHelpers: %v", err)
	}
	return &env{t: t, dir: dir, logs: &syncBuffer{}}
}

// script writes a script file and returns its path.
func (e *env) script(name, body string) string {
	e.t.Helper()
	path := filepath.Join(e.dir, name)
	if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
		e.t.Fatal(err)
	}
	return path
}

// provider returns a Provider logging into e.logs.
func (e *env) provider(opts Options) *Provider {
	opts.Logger = hclog.New(&hclog.LoggerOptions{Output: e.logs, Level: hclog.Debug})
	return New(opts)
}

// spec is a Spec for script with the helpers on PYTHONPATH.
func (e *env) spec(script string) provider.Spec {
	return provider.Spec{
		AgentID: "agent-1",
		Model:   script,
		Env:     []string{"PYTHONPATH=" + e.dir, "WARREN_SOCKET=/tmp/warren-test.sock", "WARREN_AGENT_ID=agent-1"},
	}
}

// create creates a session and registers its Stop as cleanup.
func (e *env) create(p *Provider, spec provider.Spec) *Session {
	e.t.Helper()
	s, err := p.Create(context.Background(), spec)
	if err != nil {
		e.t.Fatalf("Create: %v", err)
	}
	e.t.Cleanup(func() { _ = s.Stop() })
	return s.(*Session)
}

// pid returns the session's live process id (0 when none).
func (s *Session) pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.pid
}

// assertGone checks that pid no longer exists (it was killed and reaped).
func assertGone(t *testing.T, pid int) {
	t.Helper()
	if pid <= 0 {
		t.Fatalf("bad pid %d", pid)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("process %d still exists (kill 0: %v)", pid, err)
	}
}

func send(t *testing.T, s *Session, msg string, tools provider.ToolCaller) string {
	t.Helper()
	resp, err := s.Send(context.Background(), msg, provider.TurnIO{Tools: tools})
	if err != nil {
		t.Fatalf("Send(%q): %v", msg, err)
	}
	return resp
}
