package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// A relative script path given to `agent create --provider scripted` is
// resolved against the CLI's working directory, not the daemon's (issue 14).
func TestCreateScriptedSendsAnAbsoluteScriptPath(t *testing.T) {
	t.Parallel()
	home := shortHome(t)
	startDaemon(t, home)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "bots"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "bots", "bot.py")
	if err := os.WriteFile(script, []byte("import sys\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(warrenBin, "agent", "create", "bot", "--provider", "scripted", "--model", "bots/bot.py", "--home", home, "--json")
	cmd.Env = testEnv(t)
	cmd.Dir = dir // not the daemon's working directory
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("agent create from %s: %v\nstdout: %s\nstderr: %s", dir, err, out.String(), errb.String())
	}
	var created map[string]any
	if err := json.Unmarshal(out.Bytes(), &created); err != nil {
		t.Fatalf("agent create --json printed %q: %v", out.String(), err)
	}
	got := mustJSON(t, "agent", "inspect", "bot", "--home", home)
	if got["model"] != script {
		t.Fatalf("agent inspect: model = %v, want the absolute path %s", got["model"], script)
	}
}
