package main

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warren-dev/warren/cmd/warren/internal/exit"
)

// blockScript is a scripted bot whose turn tells the test it has begun
// (it writes a line to the FIFO "started" next to it, which blocks until
// the test reads it) and then blocks until the test releases it (a line on
// the FIFO "release").
const blockScript = `#!/bin/sh
dir=$(dirname "$0")
while read -r line; do
  case "$line" in *'"type":"turn"'*|*'"type": "turn"'*) ;; *) continue ;; esac
  echo started > "$dir/started"
  read -r x < "$dir/release"
  echo '{"type":"done","response":"released"}'
done
`

// guard bounds how long a test waits for a bot before it fails (a hang
// guard, not a synchronisation).
const guard = 2 * time.Minute

// blockingBot is a blockScript in its own directory, with its FIFOs.
type blockingBot struct{ dir, script string }

func newBlockingBot(t *testing.T, parent, name string) blockingBot {
	t.Helper()
	dir := filepath.Join(parent, name)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	b := blockingBot{dir: dir, script: filepath.Join(dir, "bot.sh")}
	if err := os.WriteFile(b.script, []byte(blockScript), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"started", "release"} {
		if err := syscall.Mkfifo(filepath.Join(dir, f), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// waitStarted returns once the bot's turn has begun.
func (b blockingBot) waitStarted(t *testing.T) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		f, err := os.Open(filepath.Join(b.dir, "started"))
		if err == nil {
			_, err = io.ReadAll(f)
			f.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("waiting for the bot's turn to begin: %v", err)
		}
	case <-time.After(guard):
		t.Fatalf("the bot's turn did not begin within %s", guard)
	}
}

// release lets the bot's turn end.
func (b blockingBot) release(t *testing.T) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		f, err := os.OpenFile(filepath.Join(b.dir, "release"), os.O_WRONLY, 0)
		if err == nil {
			_, err = f.WriteString("go\n")
			f.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("releasing the bot: %v", err)
		}
	case <-time.After(guard):
		t.Fatalf("the bot did not wait for its release within %s", guard)
	}
}

// startWarren starts the binary in the background; its output is read
// after Wait.
type bgWarren struct {
	cmd         *exec.Cmd
	out, errOut bytes.Buffer
}

func startWarren(t *testing.T, args ...string) *bgWarren {
	t.Helper()
	w := &bgWarren{cmd: exec.Command(warrenBin, args...)}
	w.cmd.Env = testEnv(t)
	w.cmd.Stdout, w.cmd.Stderr = &w.out, &w.errOut
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.cmd.Process.Kill() })
	return w
}

// wait returns the exit status.
func (w *bgWarren) wait(t *testing.T) int {
	t.Helper()
	err := w.cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return 0
}

// followUntil runs `warren events -f --since 0 REF` until a line contains
// want, and returns the lines read.
func followUntil(t *testing.T, home, ref, want string) string {
	t.Helper()
	cmd := exec.Command(warrenBin, "events", "-f", "--since", "0", ref, "--home", home)
	cmd.Env = testEnv(t)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var seen strings.Builder
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		seen.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), want) {
			return seen.String()
		}
	}
	t.Fatalf("events -f ended before a line with %q:\n%s", want, seen.String())
	return ""
}

// TestCtrlCOnSendLeavesTheTurnRunning: a real SIGINT to a waiting `agent
// send` exits 130, saying that the turn goes on and how to follow or
// cancel it; the turn does go on and completes.
func TestCtrlCOnSendLeavesTheTurnRunning(t *testing.T) {
	t.Parallel()
	home := shortHome(t)
	bot := newBlockingBot(t, home, "bot")
	startDaemon(t, home)
	mustOK(t, "agent", "create", "slow", "--provider", "scripted", "--model", bot.script, "--home", home)

	send := startWarren(t, "agent", "send", "slow", "work", "--home", home)
	bot.waitStarted(t)
	if err := send.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := send.wait(t); code != 130 {
		t.Fatalf("agent send after SIGINT: exit %d, want 130\nstderr: %s", code, send.errOut.String())
	}
	stderr := send.errOut.String()
	for _, want := range []string{"the turn goes on in the daemon", "warren events -f slow --home " + home, "warren agent cancel slow --home " + home} {
		if !strings.Contains(stderr, want) {
			t.Errorf("agent send's Ctrl-C message lacks %q:\n%s", want, stderr)
		}
	}
	if send.out.Len() != 0 {
		t.Errorf("agent send printed %q on stdout after Ctrl-C", send.out.String())
	}
	if st := mustJSON(t, "agent", "inspect", "slow", "--home", home); st["status"] != "running" {
		t.Errorf("after Ctrl-C on send the agent is %v, want running (the turn goes on)", st["status"])
	}
	bot.release(t)
	if seen := followUntil(t, home, "slow", "turn.complete"); !strings.Contains(seen, "released") {
		t.Errorf("the turn completed without the bot's response:\n%s", seen)
	}
}

// TestStreamsEndWhenTheDaemonStops: `events -f`, `agent attach` and a
// waiting `agent send` whose daemon stops say so and exit 3.
func TestStreamsEndWhenTheDaemonStops(t *testing.T) {
	t.Parallel()
	home := shortHome(t)
	b1, b2 := newBlockingBot(t, home, "b1"), newBlockingBot(t, home, "b2")
	startDaemon(t, home)
	mustOK(t, "agent", "create", "one", "--provider", "scripted", "--model", b1.script, "--home", home)
	mustOK(t, "agent", "create", "two", "--provider", "scripted", "--model", b2.script, "--home", home)

	// events -f: the replayed agent.created shows the stream is live.
	events := exec.Command(warrenBin, "events", "-f", "--since", "0", "one", "--home", home)
	events.Env = testEnv(t)
	var evErr bytes.Buffer
	events.Stderr = &evErr
	evOut, err := events.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := events.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = events.Process.Kill() })
	evLines := bufio.NewScanner(evOut)
	if !evLines.Scan() || !strings.Contains(evLines.Text(), "agent.created") {
		t.Fatalf("events -f --since 0: first line %q (%v)", evLines.Text(), evLines.Err())
	}

	send := startWarren(t, "agent", "send", "one", "work", "--home", home)
	b1.waitStarted(t)

	attach := exec.Command(warrenBin, "agent", "attach", "two", "--home", home)
	attach.Env = testEnv(t)
	var atOut, atErr bytes.Buffer
	attach.Stdout, attach.Stderr = &atOut, &atErr
	stdin, err := attach.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := attach.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = attach.Process.Kill() })
	if _, err := io.WriteString(stdin, "work\n"); err != nil {
		t.Fatal(err)
	}
	b2.waitStarted(t)

	mustOK(t, "daemon", "stop", "--home", home)

	for len(evLines.Text()) > 0 && evLines.Scan() {
	}
	if err := events.Wait(); err == nil || exitCode(err) != exit.NotRunning || !strings.Contains(evErr.String(), "the event stream ended: the daemon stopped") ||
		!strings.Contains(evErr.String(), "warren events -f --since ") {
		t.Errorf("events -f when the daemon stopped: %v, stderr %q; want exit 3 saying the daemon stopped and how to continue", err, evErr.String())
	}
	if code := send.wait(t); code != exit.NotRunning || !strings.Contains(send.errOut.String(), "the daemon stopped") {
		t.Errorf("agent send when the daemon stopped: exit %d, stderr %q; want 3 saying the daemon stopped", code, send.errOut.String())
	}
	err = attach.Wait()
	stdin.Close()
	if exitCode(err) != exit.NotRunning || !strings.Contains(atErr.String(), "the daemon stopped") {
		t.Errorf("attach when the daemon stopped: %v, stderr %q; want exit 3 saying the daemon stopped", err, atErr.String())
	}
}

func exitCode(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}
