package worker

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// TestSweepKeepsTheCopiesInUseAndTheLastLetGo: a sweep removes the
// copies (repository and worktree) of agents the worker holds no session
// of, beyond the ones let go last; a held copy, and the one an open is
// about to take up, stay whatever their age; a copy this run never held
// is dated by its last fetch; anything else in the directory is left.
func TestSweepKeepsTheCopiesInUseAndTheLastLetGo(t *testing.T) {
	dir := t.TempDir()
	c := &copies{dir: dir}
	base := time.Now().Add(-time.Hour)
	mk := func(agent string, fetched time.Time) {
		ws := c.workspace(agent, "")
		for _, d := range []string{ws.Repo, ws.Path} {
			if err := os.MkdirAll(d, 0o700); err != nil {
				t.Fatal(err)
			}
		}
		head := filepath.Join(ws.Repo, "FETCH_HEAD")
		if err := os.WriteFile(head, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(head, fetched, fetched); err != nil {
			t.Fatal(err)
		}
	}
	// Ten copies from an earlier run, a0 fetched first and a9 last.
	for i := range 10 {
		mk(fmt.Sprintf("a%d", i), base.Add(time.Duration(i)*time.Minute))
	}
	c.hold("a0") // the oldest, but a session holds it
	c.hold("a1")
	c.release("a1")                                                                   // let go now: the newest idle
	c.sweep(3, "a2", hclog.NewNullLogger())                                           // a2: an open is about to take it up
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), nil, 0o600); err != nil { // not a copy
		t.Fatal(err)
	}
	c.sweep(3, "a2", hclog.NewNullLogger())
	var left []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		left = append(left, e.Name())
	}
	want := []string{"a0", "a0.git", "a1", "a1.git", "a2", "a2.git", "a8", "a8.git", "a9", "a9.git", "notes.txt"}
	if !slices.Equal(left, want) {
		t.Fatalf("left %v\nwant %v (held a0, excepted a2, and the 3 let go last: a1, a9, a8)", left, want)
	}
	// Let go of a0: it is the newest now, and a8 goes.
	c.release("a0")
	c.sweep(3, "", hclog.NewNullLogger())
	left = left[:0]
	entries, _ = os.ReadDir(dir)
	for _, e := range entries {
		left = append(left, e.Name())
	}
	want = []string{"a0", "a0.git", "a1", "a1.git", "a9", "a9.git", "notes.txt"}
	if !slices.Equal(left, want) {
		t.Fatalf("after a0 was let go: left %v\nwant %v", left, want)
	}
}

// TestSweepLeavesACopyAnOpenHolds: a copy held while the sweep runs
// (an open that began meanwhile) is not removed.
func TestSweepLeavesACopyAnOpenHolds(t *testing.T) {
	c := &copies{dir: t.TempDir()}
	ws := c.workspace("a1", "")
	for _, d := range []string{ws.Repo, ws.Path} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	c.hold("a1")
	if err := c.remove("a1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ws.Repo); err != nil {
		t.Fatalf("a held copy was removed: %v", err)
	}
	l := c.of("a1") // an attempt's take-up, turn or hand-back on it
	l.Lock()
	c.release("a1")
	if err := c.remove("a1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ws.Repo); err != nil {
		t.Fatalf("a copy in use was removed: %v", err)
	}
	l.Unlock()
	if err := c.remove("a1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ws.Path); !os.IsNotExist(err) {
		t.Fatalf("an idle copy was kept: %v", err)
	}
}
