// Package agentinstall installs the agent CLIs the built-in acp entries
// run (`warren agents install`, issue 13): npm packages pinned to the
// versions the provider study and the e2e tests verified, installed into
// one npm prefix under the home, <home>/tools. The daemon puts
// <home>/tools/node_modules/.bin first on its PATH (Path), so a built-in
// entry's command (claude-agent-acp, codex-acp, gemini, opencode) is
// found there before anywhere else, and the agent processes, which get
// the daemon's PATH, find the same programs.
//
// scripts/e2e-install.sh pins the same versions for the e2e tests;
// TestAgentPinsMatchTheE2EScript keeps the two lists equal.
package agentinstall

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/warren-dev/warren/cmd/warren/internal/exit"
)

// agentPackage is one installable agent: its npm package at a pinned
// version and the program the built-in entry runs.
type agentPackage struct {
	spec string // npm package@version
	bin  string // the program under node_modules/.bin
}

// agentPackages maps a built-in entry's name to what installs it.
func agentPackages() map[string]agentPackage {
	return map[string]agentPackage{
		"claude":   {"@agentclientprotocol/claude-agent-acp@0.101.0", "claude-agent-acp"},
		"codex":    {"@agentclientprotocol/codex-acp@2.6.0", "codex-acp"},
		"gemini":   {"@google/gemini-cli@0.61.0", "gemini"},
		"opencode": {"opencode-ai@1.18.33", "opencode"},
	}
}

// Names lists the agents that can be installed, sorted.
func Names() []string {
	var names []string
	for n := range agentPackages() {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// toolsDir is the npm prefix of the agents installed in home.
func toolsDir(home string) string { return filepath.Join(home, "tools") }

// Bin is where the agents installed in home have their programs.
func Bin(home string) string { return filepath.Join(toolsDir(home), "node_modules", ".bin") }

// Path returns path with home's tools bin directory first (once).
func Path(home, path string) string {
	bin := Bin(home)
	parts := []string{bin}
	for _, p := range filepath.SplitList(path) {
		if p != bin && p != "" {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, string(os.PathListSeparator))
}

// ErrUnknown: a name is not one of Names.
var ErrUnknown = errors.New("unknown agent")

// Install installs the named agents with npm into home's tools prefix
// (npm's output and the progress go to stderr) and prints, for each name,
// where its program is on stdout. An unknown name is ErrUnknown, before
// anything is installed.
func Install(ctx context.Context, home string, names []string, stdout, stderr io.Writer) error {
	pkgs := agentPackages()
	var specs []string
	for _, n := range names {
		p, ok := pkgs[n]
		if !ok {
			return fmt.Errorf("%w %q: warren installs %s", ErrUnknown, n, strings.Join(Names(), ", "))
		}
		specs = append(specs, p.spec)
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return exit.Failf("npm is not on PATH: install Node.js 20 or later (with npm), then run this again")
	}
	dir := toolsDir(home)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	argv := append([]string{"install", "--prefix", dir, "--no-fund", "--no-audit", "--save-exact"}, specs...)
	fmt.Fprintf(stderr, "installing %s into %s\n", strings.Join(specs, " "), dir)
	run := exec.CommandContext(ctx, npm, argv...)
	run.Stdout, run.Stderr = stderr, stderr
	if err := run.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return exit.Failf("npm install failed (exit %d): see its output above", ee.ExitCode())
		}
		return fmt.Errorf("running npm: %w", err)
	}
	for _, n := range names {
		bin := filepath.Join(Bin(home), pkgs[n].bin)
		if _, err := os.Stat(bin); err != nil {
			return exit.Failf("npm reported success but %s is missing: %v", bin, err)
		}
		fmt.Fprintf(stdout, "%s %s\n", n, bin)
	}
	fmt.Fprintln(stderr, "the daemon finds them when it starts (if it runs: warren daemon stop; warren daemon start)")
	return nil
}
