package scripted

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/warren-dev/warren/provider"
)

func TestConcurrentSuspendAndStopWhileIdle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.create(e.provider(Options{}), e.spec(e.script("pid.py", pidScript)))
	send(t, s, "x", nil)
	pid := s.pid()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if _, err := s.Suspend(context.Background()); err != nil {
				t.Error(err)
			}
		})
		wg.Go(func() { _ = s.Stop() })
	}
	wg.Wait()
	assertGone(t, pid)
}

// BenchmarkTurn measures one turn round trip to a live Python process.
func BenchmarkTurn(b *testing.B) {
	dir := b.TempDir()
	if err := WriteHelpers(dir); err != nil {
		b.Fatal(err)
	}
	benchSession(b, dir, pidScript, nil)
}

// BenchmarkToolCallTurn measures a turn with one tool call through the
// helper library.
func BenchmarkToolCallTurn(b *testing.B) {
	dir := b.TempDir()
	if err := WriteHelpers(dir); err != nil {
		b.Fatal(err)
	}
	benchSession(b, dir, `from warren_script import read_turn, call_tool, done
while True:
    m = read_turn()
    done(str(call_tool("t", m=m)["ok"]))
`, &fakeTools{})
}

func benchSession(b *testing.B, dir, body string, tools provider.ToolCaller) {
	b.Helper()
	path := dir + "/bench.py"
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		b.Fatal(err)
	}
	p := New(Options{})
	sess, err := p.Create(context.Background(), provider.Spec{Model: path, Env: []string{"PYTHONPATH=" + dir}})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = sess.Stop() }()
	io := provider.TurnIO{Tools: tools}
	if _, err := sess.Send(context.Background(), "warm", io); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := sess.Send(context.Background(), "hello", io); err != nil {
			b.Fatal(err)
		}
	}
}
