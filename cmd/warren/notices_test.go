package main

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// flakyScript exits (status 0, a transient failure) on the first turn of
// its first two processes, then answers.
const flakyScript = `#!/bin/sh
n=$(cat "$0.count" 2>/dev/null || echo 0)
n=$((n+1))
echo $n > "$0.count"
while read -r line; do
  if [ "$n" -le 2 ]; then exit 0; fi
  echo '{"type":"done","response":"made it"}'
done
`

// flakyHome starts a daemon retrying at once, with an agent "a" on a fresh
// copy of flakyScript.
func flakyHome(t *testing.T) string {
	t.Helper()
	home := shortHome(t)
	if err := os.WriteFile(filepath.Join(home, "config.json"), []byte(`{"retry_base_delay_ms": 1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(home, "flaky.sh")
	if err := os.WriteFile(script, []byte(flakyScript), 0o700); err != nil {
		t.Fatal(err)
	}
	startDaemon(t, home)
	mustOK(t, "agent", "create", "a", "--provider", "scripted", "--model", script, "--home", home)
	return home
}

var retryLine = regexp.MustCompile(`^a: retrying in [0-9.]+m?s \(attempt (\d)( of 4)? failed\): .*scripted agent exited unexpectedly \(exit status 0\)`)

func retryLines(t *testing.T, stderr string, wantOf bool) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if len(lines) != 2 {
		t.Fatalf("stderr has %d lines, want one per retry:\n%s", len(lines), stderr)
	}
	for i, l := range lines {
		m := retryLine.FindStringSubmatch(l)
		if m == nil || m[1] != string(rune('1'+i)) || (m[2] != "") != wantOf {
			t.Fatalf("retry line %d = %q", i+1, l)
		}
	}
}

func TestSendShowsEachRetryOnStderr(t *testing.T) {
	t.Parallel()
	home := flakyHome(t)
	r := warren(t, "agent", "send", "a", "go", "--home", home)
	if r.code != 0 || r.stdout != "made it\n" {
		t.Fatalf("send: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	retryLines(t, r.stderr, false)
}

func TestSendJSONPrintsNoNotices(t *testing.T) {
	t.Parallel()
	home := flakyHome(t)
	r := warren(t, "agent", "send", "a", "go", "--json", "--home", home)
	if r.code != 0 || r.stderr != "" || !strings.Contains(r.stdout, `"made it"`) {
		t.Fatalf("send --json: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
}

func TestAttachShowsEachRetryOnStderr(t *testing.T) {
	t.Parallel()
	home := flakyHome(t)
	cmd := exec.Command(warrenBin, "agent", "attach", "a", "--home", home)
	cmd.Env = testEnv(t)
	cmd.Stdin = strings.NewReader("go\n")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || !strings.Contains(string(out), "made it") {
		t.Fatalf("attach: %v\nstdout %s\nstderr %s", err, out, stderr.String())
	}
	retryLines(t, stderr.String(), true)
}

// familyBot: a root spawns a child on every turn; the child asks for
// approval on its first turn. Each knows which it is from the identity of
// its first turn.
const familyBot = `from warren_script import read_turn, call_tool, done, agent
while True:
    msg = read_turn()
    if agent()["parent"] is None:
        call_tool("spawn_agent", name="kid", instructions="ask first")
        done("spawned")
    else:
        r = call_tool("await_input", kind="approval", prompt="may I deploy?", timeout=600)
        call_tool("send_message", recipient=agent()["parent"], text="kid got " + r["response"])
        done("done")
`

func TestAttachShowsAWaitBelowItAsItBegins(t *testing.T) {
	t.Parallel()
	home := shortHome(t)
	script := filepath.Join(home, "family.py")
	if err := os.WriteFile(script, []byte(familyBot), 0o600); err != nil {
		t.Fatal(err)
	}
	startDaemon(t, home)
	mustOK(t, "agent", "create", "root", "--provider", "scripted", "--model", script, "--home", home)

	cmd := exec.Command(warrenBin, "agent", "attach", "root", "--home", home)
	cmd.Env = testEnv(t)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	}()
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	if _, err := io.WriteString(stdin, "spawn a kid\n"); err != nil {
		t.Fatal(err)
	}
	// The kid is spawned after root's turn and waits in its first turn:
	// nobody sent it anything, yet the attached operator is told.
	var got []string
	var answer string
	deadline := time.After(60 * time.Second)
	for answer == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("attach ended; stderr so far: %q", got)
			}
			got = append(got, l)
			if strings.HasPrefix(l, "answer with: ") {
				answer = strings.TrimPrefix(l, "answer with: ")
			}
		case <-deadline:
			t.Fatalf("no wait notice on attach's stderr; got %q", got)
		}
	}
	if len(got) != 3 || got[0] != "root/kid is waiting for input (approval): may I deploy?" || !strings.HasPrefix(got[1], "token id: ") {
		t.Fatalf("wait notice = %q", got)
	}
	tokenID := strings.TrimPrefix(got[1], "token id: ")
	want := "warren agent resume root/kid --home " + home + " --token-id " + tokenID + " RESPONSE"
	if answer != want {
		t.Fatalf("answer line = %q\nwant          %q", answer, want)
	}
	// The printed command, as printed, answers the wait.
	args := strings.Fields(answer)[1:]
	args[len(args)-1] = "yes"
	if out := mustOK(t, args...); !strings.Contains(out, "done") {
		t.Fatalf("warren %v printed %q", args, out)
	}
}
