package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNewcomerRoughEdges (issue 32): --instructions-file; a failed last
// turn shows in agent list and agent tree (a note and a mark, not a
// status); a send to a terminated agent says it is terminated.
func TestNewcomerRoughEdges(t *testing.T) {
	t.Parallel()
	d := startTestDaemon(t, modeBinary)
	prompt := filepath.Join(d.dir, "lead.md")
	if err := os.WriteFile(prompt, []byte("You lead.\nBe brief."), 0o600); err != nil {
		t.Fatal(err)
	}
	runCLI(t, d.Home, "agent", "create", "lead", "--provider", "inproc", "--model", "echo", "--instructions-file", prompt).
		want(t, 0, "agent create --instructions-file")
	if ins := d.callN("agent.inspect", map[string]any{"agent_id": "lead"}); ins["instructions"] != "You lead.\nBe brief." {
		t.Fatalf("instructions = %q", ins["instructions"])
	}
	runCLI(t, d.Home, "agent", "create", "x", "--instructions", "a", "--instructions-file", prompt).want(t, 2, "both instruction flags")

	bad := filepath.Join(d.dir, "bad.py")
	if err := os.WriteFile(bad, []byte("#!"+procPython+"\nraise SystemExit('the worker broke')\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	runCLI(t, d.Home, "agent", "create", "w1", "--parent", "lead", "--provider", "scripted", "--model", bad).want(t, 0, "create w1")
	runCLI(t, d.Home, "agent", "send", "w1", "work").want(t, 1, "a send whose turn fails")
	list := runCLI(t, d.Home, "agent", "list").want(t, 0, "agent list").stdout
	if !strings.Contains(list, "lead/w1: last turn failed:") || strings.Contains(list, "failed  ") {
		t.Fatalf("agent list after a failed turn:\n%s", list)
	}
	tree := runCLI(t, d.Home, "agent", "tree").want(t, 0, "agent tree").stdout
	if !strings.Contains(tree, "w1  [idle]  (last turn failed)") {
		t.Fatalf("agent tree after a failed turn:\n%s", tree)
	}

	runCLI(t, d.Home, "agent", "terminate", "w1").want(t, 0, "terminate w1")
	r := runCLI(t, d.Home, "agent", "send", "w1", "hello")
	if r.code == 0 || !strings.Contains(r.stderr, "is terminated") {
		t.Fatalf("send to a terminated agent: exit %d, %s", r.code, r.stderr)
	}
}
