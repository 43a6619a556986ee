package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warren-dev/warren/cmd/warren/internal/exit"
)

// warrenIn runs the built binary with stdin.
func warrenIn(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	return runBin(t, warrenBin, testEnv(t), stdin, args...)
}

// TestHelpForASubcommand: `warren help agent send` and `warren agent send
// --help` print the same help: the usage line, the examples, the flags.
func TestHelpForASubcommand(t *testing.T) {
	viaHelp := mustOK(t, "help", "agent", "send")
	viaFlag := mustOK(t, "agent", "send", "--help")
	if viaHelp != viaFlag {
		t.Errorf("warren help agent send differs from warren agent send --help:\n%s\n---\n%s", viaHelp, viaFlag)
	}
	for _, want := range []string{"Usage:\n  warren agent send REF (MESSAGE | - | --file PATH)", "Examples:\n", "git diff | warren agent send reviewer -",
		"--file string", "--provider string", "--home string", "--json", "warren events -f REF"} {
		if !strings.Contains(viaFlag, want) {
			t.Errorf("agent send --help lacks %q:\n%s", want, viaFlag)
		}
	}
	if out := mustOK(t, "agent", "--help"); !strings.Contains(out, "Available Commands:") || !strings.Contains(out, "terminate") ||
		!strings.Contains(out, "Examples:") {
		t.Errorf("agent --help does not list the agent commands with examples:\n%s", out)
	}
	// Aliases work and are listed.
	if out := mustOK(t, "agent", "ls", "--help"); !strings.Contains(out, "Aliases:\n  list, ls") {
		t.Errorf("agent ls --help does not show the alias:\n%s", out)
	}
	if out := mustOK(t, "help", "agent", "rm"); !strings.Contains(out, "warren agent terminate REF [--recursive]") {
		t.Errorf("help agent rm is not terminate's help:\n%s", out)
	}
}

// TestVersionFlag: --version and `version` print the same line.
func TestVersionFlag(t *testing.T) {
	want := "warren " + version + "\n"
	if out := mustOK(t, "--version"); out != want {
		t.Errorf("warren --version = %q, want %q", out, want)
	}
	if out := mustOK(t, "version"); out != want {
		t.Errorf("warren version = %q, want %q", out, want)
	}
}

// TestDidYouMean: a mistyped command or flag is a usage error (exit 2)
// that suggests the one meant.
func TestDidYouMean(t *testing.T) {
	home := shortHome(t)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"agent", "lsit"}, `did you mean "list"?`},
		{[]string{"agnet", "list"}, `did you mean "agent"?`},
		{[]string{"daemon", "stauts"}, `did you mean "status"?`},
		{[]string{"help", "agent", "sned"}, `did you mean "send"?`},
		{[]string{"help", "nosuch"}, `unknown command "nosuch"`},
		{[]string{"agent", "list", "--wdie", "--home", home}, "did you mean --wide?"},
		{[]string{"agent", "send", "a", "b", "--provder", "x", "--home", home}, "did you mean --provider?"},
		{[]string{"agent", "list", "--hom", home}, "did you mean --home?"},
		{[]string{"agent", "list", "--status", "idel", "--home", home}, "did you mean idle?"},
	}
	for _, tc := range cases {
		r := warren(t, tc.args...)
		if r.code != exit.Usage || !strings.Contains(r.stderr, tc.want) || r.stdout != "" {
			t.Errorf("warren %q: exit %d stdout %q stderr %q; want exit 2 and %q", tc.args, r.code, r.stdout, r.stderr, tc.want)
		}
	}
}

// TestCompletionScripts: cobra's generator writes a script for each shell
// that names warren's commands; the bash one is valid bash.
func TestCompletionScripts(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		out := mustOK(t, "completion", shell)
		if len(out) < 500 || !strings.Contains(out, "warren") || !strings.Contains(out, "__complete") {
			t.Errorf("completion %s: %d bytes, not a script that calls warren __complete:\n%.300s", shell, len(out), out)
		}
		if shell == "bash" {
			path := filepath.Join(t.TempDir(), "warren.bash")
			if err := os.WriteFile(path, []byte(out), 0o600); err != nil {
				t.Fatal(err)
			}
			if b, err := exec.Command("bash", "-n", path).CombinedOutput(); err != nil {
				t.Errorf("bash -n on the completion script: %v\n%s", err, b)
			}
		}
	}
	// The commands themselves complete (the names come from the binary).
	out := mustOK(t, "__complete", "ag")
	if !strings.Contains(out, "agent") {
		t.Errorf("__complete ag = %q, want agent", out)
	}
	out = mustOK(t, "__complete", "agent", "")
	for _, want := range []string{"send", "list", "terminate", "inspect"} {
		if !strings.Contains(out, want+"\t") && !strings.Contains(out, want+"\n") {
			t.Errorf("__complete agent '' lacks %s:\n%s", want, out)
		}
	}
	if r := warren(t, "completion", "tcsh"); r.code != exit.Usage {
		t.Errorf("completion tcsh: exit %d, want 2 (stderr %q)", r.code, r.stderr)
	}
}

// completions runs `warren __complete ARGS` and returns the values it
// offers (without descriptions or the directive line).
func completions(t *testing.T, args ...string) []string {
	t.Helper()
	out := mustOK(t, append([]string{"__complete"}, args...)...)
	var vals []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" || strings.HasPrefix(l, ":") {
			continue
		}
		v, _, _ := strings.Cut(l, "\t")
		vals = append(vals, v)
	}
	return vals
}

// TestDynamicCompletionOfAgents: REF completes with the agents' paths and
// unique names, from the daemon while it runs and from the logs on disk
// when it is down (a terminated agent is offered by neither).
func TestDynamicCompletionOfAgents(t *testing.T) {
	t.Parallel()
	home := shortHome(t)
	startDaemon(t, home)
	for _, a := range [][]string{{"lead"}, {"w1", "--parent", "lead"}, {"w2", "--parent", "lead"}, {"gone"}} {
		mustOK(t, append([]string{"agent", "create", a[0], "--provider", "inproc", "--model", "echo", "--home", home}, a[1:]...)...)
	}
	mustOK(t, "agent", "terminate", "gone", "--home", home)
	want := "lead lead/w1 w1 lead/w2 w2"
	check := func(when string) {
		t.Helper()
		got := completions(t, "--home", home, "agent", "send", "")
		if strings.Join(got, " ") != want {
			t.Errorf("%s: __complete agent send '' = %q, want %q", when, got, want)
		}
		if got := completions(t, "--home", home, "agent", "send", "lead/w"); strings.Join(got, " ") != "lead/w1 lead/w2" {
			t.Errorf("%s: __complete agent send lead/w = %q", when, got)
		}
		if got := completions(t, "--home", home, "agent", "send", "lead", ""); len(got) != 0 {
			t.Errorf("%s: the MESSAGE is not completed, got %q", when, got)
		}
		if got := completions(t, "--home", home, "agent", "create", "x", "--parent", "l"); strings.Join(got, " ") != "lead lead/w1 lead/w2" {
			t.Errorf("%s: __complete --parent l = %q", when, got)
		}
	}
	check("daemon up")
	mustOK(t, "daemon", "stop", "--home", home)
	check("daemon down")
}
