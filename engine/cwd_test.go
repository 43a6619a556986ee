package engine

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// whereBot answers "where" with its working directory and spawns a child
// running the same script on "spawn".
const whereBot = `import os, sys
sys.path.insert(0, os.environ["WARREN_TEST_HELPER"])
from warren_script import read_turn, call_tool, done

while True:
    msg = read_turn()
    if msg.rstrip().endswith("spawn"):
        call_tool("spawn_agent", name="kid", instructions="Say where you are.")
        done("spawned")
    else:
        done(os.getcwd())
`

// TestAgentCwdIsWhereItsProcessesRunInheritedAndRecovered: an agent created
// with a working directory runs its script there; a child it spawns
// inherits the directory; after a restart both still run there (the
// directory is in agent.created) and inspect shows it.
func TestAgentCwdIsWhereItsProcessesRunInheritedAndRecovered(t *testing.T) {
	h, _ := scriptedHarness(t)
	work, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	bot := filepath.Join(t.TempDir(), "where.py")
	if err := os.WriteFile(bot, []byte(whereBot), 0o644); err != nil {
		t.Fatal(err)
	}
	lead, err := h.c.CreateAgent(context.Background(), CreateSpec{Name: "lead", Provider: "scripted", Model: bot, Cwd: work})
	if err != nil {
		t.Fatal(err)
	}
	if got := h.send(lead, "where").Response; got != work {
		t.Fatalf("lead runs in %q, want %q", got, work)
	}
	if got := h.send(lead, "spawn").Response; got != "spawned" {
		t.Fatalf("spawn: %q", got)
	}
	kid, err := h.c.Resolve("lead/kid")
	if err != nil {
		t.Fatal(err)
	}
	h.quiet()
	if got := h.send(kid, "where").Response; got != work {
		t.Fatalf("child runs in %q, want its parent's %q", got, work)
	}
	h.restart()
	for _, id := range []string{lead, kid} {
		if got := h.send(id, "where").Response; got != work {
			t.Fatalf("after a restart %s runs in %q, want %q", id, got, work)
		}
		view, err := h.c.Inspect(context.Background(), id)
		if err != nil || view.Cwd != work {
			t.Fatalf("inspect %s: cwd = %v (%v), want %q", id, view.Cwd, err, work)
		}
	}
}
