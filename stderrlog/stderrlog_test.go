package stderrlog

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/faultfs"
)

func newTestStderrLogs(fsys faultfs.FS, capBytes int64) *Logs {
	s := New(fsys, func(id string) string { return "/home/agents/" + id }, hclog.NewNullLogger())
	s.Cap = capBytes
	return s
}

func TestStderrLogRotatesKeepingTheNewest(t *testing.T) {
	fsys := faultfs.NewMem()
	if err := fsys.MkdirAll("/home/agents/a", 0o700); err != nil {
		t.Fatal(err)
	}
	logs := newTestStderrLogs(fsys, 10)
	l := logs.Acquire("a")
	for _, s := range []string{"1234", "5678", "abcd", "efgh", "0123456789ABCDEF"} {
		if n, err := l.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	logs.Release(l)
	cur, _ := faultfs.ReadFile(fsys, "/home/agents/a/stderr.log")
	old, _ := faultfs.ReadFile(fsys, "/home/agents/a/stderr.log.1")
	// Each file stays within the cap; a write larger than the cap keeps its end.
	if string(cur) != "6789ABCDEF" || string(old) != "abcdefgh" {
		t.Fatalf("stderr.log = %q, stderr.log.1 = %q", cur, old)
	}
	// A write after the last process ended (the pipe draining) still lands.
	if _, err := l.Write([]byte("!")); err != nil {
		t.Fatal(err)
	}
	if cur, _ := faultfs.ReadFile(fsys, "/home/agents/a/stderr.log"); len(cur) > 10 || !strings.HasSuffix(string(cur), "!") {
		t.Fatalf("late write: stderr.log = %q", cur)
	}
}

func TestStderrLogDoesNotFollowASymlink(t *testing.T) {
	dir := t.TempDir()
	fsys := faultfs.OS{}
	agentDir := filepath.Join(dir, "agents", "a")
	if err := os.MkdirAll(agentDir, 0o700); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "victim")
	if err := os.WriteFile(target, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(agentDir, Name)); err != nil {
		t.Fatal(err)
	}
	logs := New(fsys, func(id string) string { return filepath.Join(dir, "agents", id) }, hclog.NewNullLogger())
	l := logs.Acquire("a")
	if n, err := l.Write([]byte("secret output")); n != 13 || err != nil {
		t.Fatalf("Write = %d, %v (a process's stderr must never fail)", n, err)
	}
	logs.Release(l)
	if data, _ := os.ReadFile(target); string(data) != "keep" {
		t.Fatalf("the symlink's target was written: %q", data)
	}
	if _, err := faultfs.OpenNoFollow(fsys, filepath.Join(agentDir, Name), os.O_RDONLY, 0); !errors.Is(err, faultfs.ErrSymlink) {
		t.Fatalf("stderr.log should still be the link: %v", err)
	}
}

// An agent taken over from another daemon of a cluster has no directory
// in this home yet: its stderr is kept all the same (issue 37: it was
// dropped, "no such file or directory").
func TestStderrOfAnAgentWithoutADirectory(t *testing.T) {
	home := t.TempDir()
	logs := New(faultfs.OS{}, func(id string) string { return filepath.Join(home, "agents", id) }, hclog.NewNullLogger())
	if err := os.Mkdir(filepath.Join(home, "agents"), 0o700); err != nil {
		t.Fatal(err)
	}
	l := logs.Acquire("taken")
	if _, err := l.Write([]byte("Traceback: boom\n")); err != nil {
		t.Fatal(err)
	}
	logs.Release(l)
	b, err := os.ReadFile(filepath.Join(home, "agents", "taken", Name))
	if err != nil || string(b) != "Traceback: boom\n" {
		t.Fatalf("stderr.log = %q, %v", b, err)
	}
}

// TestCopyGetsEveryWriteInOrder: Copy sees each write whole, in order,
// with its agent, also when the file cannot take it (no directory) and
// when the cap cuts what the file keeps.
func TestCopyGetsEveryWriteInOrder(t *testing.T) {
	fsys := faultfs.NewMem()
	if err := fsys.MkdirAll("/home/agents/a", 0o700); err != nil {
		t.Fatal(err)
	}
	logs := newTestStderrLogs(fsys, 4)
	var got []string
	logs.Copy = func(id string, p []byte) { got = append(got, id+":"+string(p)) }
	a, b := logs.Acquire("a"), logs.Acquire("b") // b has no directory
	for _, w := range []struct {
		l *Log
		s string
	}{{a, "one"}, {b, "two"}, {a, "three33"}} {
		if _, err := w.l.Write([]byte(w.s)); err != nil {
			t.Fatal(err)
		}
	}
	if want := "a:one b:two a:three33"; strings.Join(got, " ") != want {
		t.Fatalf("Copy got %q, want %q", strings.Join(got, " "), want)
	}
}
