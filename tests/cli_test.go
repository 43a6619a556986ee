package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cliResult is one run of the binary.
type cliResult struct {
	code           int
	stdout, stderr string
}

// runCLI runs the built binary with --home and args.
func runCLI(t *testing.T, home string, args ...string) cliResult {
	t.Helper()
	if procBuildErr != nil {
		t.Fatal(procBuildErr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, procBinary, append([]string{"--home", home}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("warren %v: %v", args, err)
	}
	return cliResult{code: code, stdout: out.String(), stderr: errb.String()}
}

func (r cliResult) want(t *testing.T, code int, what string) cliResult {
	t.Helper()
	if r.code != code {
		t.Fatalf("%s: exit %d, want %d\nstdout: %s\nstderr: %s", what, r.code, code, r.stdout, r.stderr)
	}
	return r
}

func (r cliResult) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		t.Fatalf("--json output %q: %v", r.stdout, err)
	}
	return m
}

// TestCLIBinaryLifecycle drives the built binary as a user does: start in
// the background, create, send, list, inspect, errors with their exit
// codes, stop, and read the log with the daemon down.
func TestCLIBinaryLifecycle(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "w")
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "h")
	t.Cleanup(func() {
		// Never leave a background daemon behind.
		if b, err := os.ReadFile(filepath.Join(home, "daemon.pid")); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		_ = os.RemoveAll(dir)
	})

	runCLI(t, home, "daemon", "status").want(t, 3, "daemon status with no daemon")
	runCLI(t, home, "agent", "list").want(t, 3, "agent list with no daemon")
	runCLI(t, home, "daemon", "start").want(t, 0, "daemon start")
	st := runCLI(t, home, "--json", "daemon", "status").want(t, 0, "daemon status").json(t)
	if st["pid"] == nil || st["boot_id"] == nil {
		t.Fatalf("daemon status --json = %v", st)
	}
	r := runCLI(t, home, "daemon", "start").want(t, 1, "second daemon start")
	if !strings.Contains(r.stdout+r.stderr, "already running") {
		t.Fatalf("second daemon start does not say already running: %+v", r)
	}

	cr := runCLI(t, home, "--json", "agent", "create", "cli1", "--provider", "inproc", "--model", "echo").want(t, 0, "agent create").json(t)
	if cr["name"] != "cli1" || len(cr["agent_id"].(string)) != 32 {
		t.Fatalf("agent create --json = %v", cr)
	}
	sr := runCLI(t, home, "--json", "agent", "send", "cli1", "hello there").want(t, 0, "agent send").json(t)
	if sr["response"] != "echo: hello there" {
		t.Fatalf("agent send --json = %v", sr)
	}
	lr := runCLI(t, home, "--json", "agent", "list").want(t, 0, "agent list").json(t)
	if agents, _ := lr["agents"].([]any); len(agents) != 1 || !strings.Contains(mustJSON(t, agents[0]), `"name":"cli1"`) {
		t.Fatalf("agent list --json = %v", lr)
	}
	human := runCLI(t, home, "agent", "list").want(t, 0, "agent list (table)")
	if !strings.Contains(human.stdout, "cli1") {
		t.Fatalf("agent list table lacks cli1:\n%s", human.stdout)
	}
	runCLI(t, home, "agent", "inspect", "nosuch").want(t, 1, "inspect of an unknown agent")
	runCLI(t, home, "agent", "create", "bad name!").want(t, 1, "create with an invalid name")
	runCLI(t, home, "agent", "frobnicate").want(t, 2, "unknown subcommand")
	runCLI(t, home, "agent", "send", "cli1").want(t, 2, "send without a message")

	runCLI(t, home, "daemon", "stop").want(t, 0, "daemon stop")
	for _, f := range []string{"daemon.sock", "daemon.pid"} {
		if _, err := os.Stat(filepath.Join(home, f)); !os.IsNotExist(err) {
			t.Fatalf("%s after daemon stop: %v", f, err)
		}
	}
	runCLI(t, home, "agent", "list").want(t, 3, "agent list after stop")
	logs := runCLI(t, home, "logs", "cli1").want(t, 0, "logs with the daemon down")
	for _, ev := range []string{"agent.created", "turn.start", "turn.complete"} {
		if !strings.Contains(logs.stdout, ev) {
			t.Fatalf("logs output lacks %s:\n%s", ev, logs.stdout)
		}
	}
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
