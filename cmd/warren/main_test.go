package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// warrenBin is the binary built by TestMain; every CLI test runs it.
var warrenBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "wbin")
	if err != nil {
		fmt.Fprintln(os.Stderr, "make a directory for the test binary:", err)
		os.Exit(1)
	}
	warrenBin = filepath.Join(dir, "warren")
	build := exec.Command("go", "build", "-o", warrenBin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build warren for the CLI tests:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// shortHome returns a fresh home with a short path (the socket path must fit
// in 107 bytes), removed when the test ends.
func shortHome(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "wt")
	if err != nil {
		t.Fatal(err)
	}
	if len(filepath.Join(dir, "daemon.sock")) > 100 {
		os.Remove(dir) // $TMPDIR is too deep for a socket path
		if dir, err = os.MkdirTemp("/tmp", "wt"); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

type result struct {
	code           int
	stdout, stderr string
}

// warren runs the built binary with args (WARREN_HOME unset, HOME pointed at
// an empty directory so nothing touches the real ~/.warren).
func warren(t *testing.T, args ...string) result {
	t.Helper()
	return runBin(t, warrenBin, testEnv(t), "", args...)
}

// runBin runs bin with env, stdin and args and returns its exit code and
// output; it fails the test if bin cannot be run at all.
func runBin(t *testing.T, bin string, env []string, stdin string, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %s %v: %v", filepath.Base(bin), args, err)
	}
	return result{code, out.String(), errb.String()}
}

func testEnv(t *testing.T) []string {
	env := []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH"), "TMPDIR=/tmp"}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "GO") {
			env = append(env, kv)
		}
	}
	return env
}

// mustOK runs warren and fails the test unless it exits 0.
func mustOK(t *testing.T, args ...string) string {
	t.Helper()
	r := warren(t, args...)
	if r.code != 0 {
		t.Fatalf("warren %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// mustJSON runs warren with --json and decodes its single JSON object.
func mustJSON(t *testing.T, args ...string) map[string]any {
	t.Helper()
	out := mustOK(t, append(args, "--json")...)
	var m map[string]any
	dec := json.NewDecoder(strings.NewReader(out))
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("warren %s --json: output is not a JSON object (%v): %q", strings.Join(args, " "), err, out)
	}
	if dec.More() {
		t.Fatalf("warren %s --json: more than one JSON value: %q", strings.Join(args, " "), out)
	}
	return m
}
