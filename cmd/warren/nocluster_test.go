package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warren-dev/warren/cmd/warren/internal/exit"
)

// TestNoclusterBuild builds warren with -tags nocluster and checks that the
// binary links no NATS module, that every cluster entry point refuses with
// the one message, and that a local daemon runs as usual.
func TestNoclusterBuild(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "warren-nocluster")
	if out, err := exec.Command("go", "build", "-tags", "nocluster", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build -tags nocluster: %v\n%s", err, out)
	}
	mods, err := exec.Command("go", "version", "-m", bin).CombinedOutput()
	if err != nil {
		t.Fatalf("go version -m: %v\n%s", err, mods)
	}
	if bytes.Contains(mods, []byte("nats-io")) {
		t.Fatalf("the nocluster binary links NATS modules:\n%s", mods)
	}
	run := func(args ...string) result {
		t.Helper()
		return runBin(t, bin, testEnv(t), "", args...)
	}
	home := shortHome(t)
	const refusal = "this binary was built without cluster support (-tags nocluster)"
	for _, args := range [][]string{
		{"daemon", "start", "--cluster-embedded"},
		{"daemon", "start", "--foreground", "--cluster", "nats://127.0.0.1:1"},
		{"export", "0123456789abcdef0123456789abcdef", "--cluster", "nats://127.0.0.1:1"},
		{"migrate", "--to", "nats://127.0.0.1:1"},
	} {
		r := run(append(args, "--home", home)...)
		if r.code != exit.DaemonErr || !strings.Contains(r.stderr, refusal) {
			t.Errorf("warren %s: exit %d, stderr %q; want exit %d and %q", strings.Join(args, " "), r.code, r.stderr, exit.DaemonErr, refusal)
		}
	}
	if r := run("daemon", "start", "--home", home); r.code != 0 {
		t.Fatalf("local daemon start: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	defer run("daemon", "stop", "--home", home)
	if r := run("agent", "create", "lead", "--provider", "inproc", "--model", "echo", "--home", home); r.code != 0 {
		t.Fatalf("agent create on the nocluster build: exit %d\n%s", r.code, r.stderr)
	}
	if r := run("agent", "send", "lead", "hi", "--home", home); r.code != 0 || !strings.Contains(r.stdout, "echo: hi") {
		t.Fatalf("agent send on the nocluster build: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
