package daemonctl

import (
	"os"
	"path/filepath"
	"testing"
)

// TestLogTailShowsTheLastLinesSinceTheStart: what a failed start prints
// of daemon.log is the last lines written after the offset it started at,
// indented, never the lines of an earlier run.
func TestLogTailShowsTheLastLinesSinceTheStart(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "daemon.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("earlier run\n"); err != nil {
		t.Fatal(err)
	}
	off := int64(len("earlier run\n"))
	if got := logTail(f, off, 2); got != "" {
		t.Errorf("logTail of nothing new = %q, want \"\"", got)
	}
	if _, err := f.WriteString("a\nb\nc\n"); err != nil {
		t.Fatal(err)
	}
	if got, want := logTail(f, off, 2), "  b\n  c\n"; got != want {
		t.Errorf("logTail(2) = %q, want %q", got, want)
	}
	if got, want := logTail(f, off, 10), "  a\n  b\n  c\n"; got != want {
		t.Errorf("logTail(10) = %q, want %q", got, want)
	}
}
