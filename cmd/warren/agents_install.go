package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"
)

// Agent CLIs installed by `warren agents install` (issue 13): npm packages
// pinned to the versions the provider study and the e2e tests verified,
// installed into one npm prefix under the home, <home>/tools. The daemon
// puts <home>/tools/node_modules/.bin first on its PATH (toolsPath), so a
// built-in entry's command (claude-agent-acp, codex-acp, gemini, opencode)
// is found there before anywhere else, and the agent processes, which get
// the daemon's PATH, find the same programs.
//
// scripts/e2e-install.sh pins the same versions for the e2e tests;
// TestAgentPinsMatchTheE2EScript keeps the two lists equal.

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

// installableAgents lists agentPackages' names, sorted.
func installableAgents() []string {
	var names []string
	for n := range agentPackages() {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// toolsDir is the npm prefix of the agents installed in home.
func toolsDir(home string) string { return filepath.Join(home, "tools") }

// toolsBin is where the installed agents' programs are.
func toolsBin(home string) string { return filepath.Join(toolsDir(home), "node_modules", ".bin") }

// toolsPath returns path with home's tools bin directory first (once).
func toolsPath(home, path string) string {
	bin := toolsBin(home)
	parts := []string{bin}
	for _, p := range filepath.SplitList(path) {
		if p != bin && p != "" {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, string(os.PathListSeparator))
}

func newAgentsCmd(c *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agents",
		Short: "install the agent CLIs the built-in acp entries run",
		Args:  args(0, 0),
	}
	cmd.AddCommand(newAgentsInstallCmd(c))
	return cmd
}

func newAgentsInstallCmd(c *cli) *cobra.Command {
	names := strings.Join(installableAgents(), ", ")
	cmd := &cobra.Command{
		Use:   "install NAME...",
		Short: "install pinned agent CLIs with npm into <home>/tools (" + names + ")",
		Long: `Install the agent CLI of each built-in acp entry NAME (` + names + `)
with npm, at the version warren was tested with, into <home>/tools. The
daemon looks there first; restart it (warren daemon stop; warren daemon
start) if it was running without them. Needs node and npm on PATH.`,
		Example:   indent("warren agents install claude codex\nwarren agent create lead --provider claude"),
		Args:      args(1, len(installableAgents()), "NAME"),
		ValidArgs: installableAgents(),
	}
	cmd.RunE = c.runE(func(ctx context.Context, cmd *cobra.Command, want []string) error {
		pkgs := agentPackages()
		var specs []string
		for _, n := range want {
			p, ok := pkgs[n]
			if !ok {
				return usageErr(cmd.UseLine(), "unknown agent %q: warren installs %s", n, names)
			}
			specs = append(specs, p.spec)
		}
		return c.npmInstall(ctx, want, specs)
	})
	return cmd
}

// npmInstall installs specs into home's tools prefix and prints, for each
// name, where its program is.
func (c *cli) npmInstall(ctx context.Context, names, specs []string) error {
	npm, err := exec.LookPath("npm")
	if err != nil {
		return &exitError{code: exitDaemonErr, msg: "npm is not on PATH: install Node.js 20 or later (with npm), then run this again"}
	}
	dir := toolsDir(c.home)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	argv := append([]string{"install", "--prefix", dir, "--no-fund", "--no-audit", "--save-exact"}, specs...)
	fmt.Fprintf(c.stderr, "installing %s into %s\n", strings.Join(specs, " "), dir)
	run := exec.CommandContext(ctx, npm, argv...)
	run.Stdout, run.Stderr = c.stderr, c.stderr
	if err := run.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return &exitError{code: exitDaemonErr, msg: fmt.Sprintf("npm install failed (exit %d): see its output above", ee.ExitCode())}
		}
		return fmt.Errorf("running npm: %w", err)
	}
	pkgs := agentPackages()
	for _, n := range names {
		bin := filepath.Join(toolsBin(c.home), pkgs[n].bin)
		if _, err := os.Stat(bin); err != nil {
			return &exitError{code: exitDaemonErr, msg: fmt.Sprintf("npm reported success but %s is missing: %v", bin, err)}
		}
		fmt.Fprintf(c.stdout, "%s %s\n", n, bin)
	}
	fmt.Fprintln(c.stderr, "the daemon finds them when it starts (if it runs: warren daemon stop; warren daemon start)")
	return nil
}
