package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warren-dev/warren/cmd/warren/internal/exit"
)

// runWarrenPath runs warren with PATH set to path.
func runWarrenPath(t *testing.T, path string, args ...string) result {
	t.Helper()
	var env []string
	for _, kv := range testEnv(t) {
		if !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	return runBin(t, warrenBin, append(env, "PATH="+path), "", args...)
}

// TestAgentsInstallIntoTheHome: `warren agents install opencode` runs npm
// with the pinned package into <home>/tools, and the daemon then runs the
// built-in opencode entry from there, with nothing on its PATH. The npm
// here is a stand-in that records its arguments and "installs" the fake
// ACP agent as node_modules/.bin/opencode.
func TestAgentsInstallIntoTheHome(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "fakeagent")
	if out, err := exec.Command("go", "build", "-o", fake, "../../provider/acp/internal/fakeagent").CombinedOutput(); err != nil {
		t.Fatalf("building the fake ACP agent: %v\n%s", err, out)
	}
	npmDir := filepath.Join(dir, "npmbin")
	if err := os.Mkdir(npmDir, 0o700); err != nil {
		t.Fatal(err)
	}
	argsFile := filepath.Join(dir, "npm.args")
	script := `#!/bin/sh
echo "$@" > ` + argsFile + `
prefix=""
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix="$2"; shift ;;
    opencode-ai@*) mkdir -p "$prefix/node_modules/.bin" && ln -s ` + fake + ` "$prefix/node_modules/.bin/opencode" ;;
  esac
  shift
done
`
	if err := os.WriteFile(filepath.Join(npmDir, "npm"), []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "home")
	basePath := os.Getenv("PATH")

	r := runWarrenPath(t, npmDir+":"+basePath, "agents", "install", "opencode", "--home", home)
	if r.code != 0 {
		t.Fatalf("agents install: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	bin := filepath.Join(home, "tools", "node_modules", ".bin", "opencode")
	if r.stdout != "opencode "+bin+"\n" {
		t.Fatalf("agents install printed %q, want the program's path %s", r.stdout, bin)
	}
	got, err := os.ReadFile(argsFile)
	if err != nil {
		t.Fatal(err)
	}
	if want := "install --prefix " + filepath.Join(home, "tools") + " "; !strings.HasPrefix(string(got), want) ||
		!strings.HasSuffix(strings.TrimSpace(string(got)), " opencode-ai@1.18.33") {
		t.Fatalf("npm ran with %q; want %q... opencode-ai@1.18.33", got, want)
	}

	// The daemon's PATH is an empty directory: the entry's "opencode" can
	// only be found under the home.
	empty := t.TempDir()
	if r := runWarrenPath(t, empty, "daemon", "start", "--home", home); r.code != 0 {
		t.Fatalf("daemon start: exit %d\n%s", r.code, r.stderr)
	}
	t.Cleanup(func() { runWarrenPath(t, empty, "daemon", "stop", "--home", home) })
	mustOK(t, "agent", "create", "w", "--provider", "opencode", "--home", home)
	out := mustOK(t, "agent", "send", "w", "@say hello from the home's tools", "--home", home)
	if !strings.Contains(out, "hello from the home's tools") {
		t.Fatalf("agent send printed %q; want the installed agent's answer", out)
	}
}

// TestAgentsInstallRefusals: an unknown name is a usage error naming the
// known ones; without npm the error says what to install.
func TestAgentsInstallRefusals(t *testing.T) {
	home := t.TempDir()
	r := warren(t, "agents", "install", "cursor", "--home", home)
	if r.code != exit.Usage || !strings.Contains(r.stderr, `unknown agent "cursor"`) || !strings.Contains(r.stderr, "claude, codex, gemini, opencode") {
		t.Fatalf("unknown agent: exit %d, stderr %q", r.code, r.stderr)
	}
	r = runWarrenPath(t, t.TempDir(), "agents", "install", "codex", "--home", home)
	if r.code != exit.DaemonErr || !strings.Contains(r.stderr, "npm is not on PATH: install Node.js") {
		t.Fatalf("without npm: exit %d, stderr %q", r.code, r.stderr)
	}
}
