package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tmux drives a terminal program: it runs in a detached tmux session of
// 160x40; keys are typed with send-keys and the screen read with
// capture-pane.
type tmux struct {
	t       *testing.T
	session string
}

func newTmux(t *testing.T, argv ...string) *tmux {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is not installed (Debian package tmux; .ci/run installs it)")
	}
	x := &tmux{t: t, session: fmt.Sprintf("warren-top-%d-%d", os.Getpid(), time.Now().UnixNano())}
	x.run(append([]string{"new-session", "-d", "-s", x.session, "-x", "160", "-y", "40"}, strings.Join(argv, " "))...)
	t.Cleanup(func() { _ = exec.Command("tmux", "kill-session", "-t", x.session).Run() })
	return x
}

func (x *tmux) run(args ...string) string {
	x.t.Helper()
	out, err := exec.Command("tmux", args...).CombinedOutput()
	if err != nil {
		x.t.Fatalf("tmux %v: %v: %s", args, err, out)
	}
	return string(out)
}

func (x *tmux) keys(keys ...string) {
	x.run(append([]string{"send-keys", "-t", x.session}, keys...)...)
}

func (x *tmux) screen() string { return x.run("capture-pane", "-p", "-t", x.session) }

// until waits for the screen to hold every one of want.
func (x *tmux) until(what string, want ...string) string {
	x.t.Helper()
	deadline := time.Now().Add(procReadyDeadline)
	for {
		s := x.screen()
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(s, w)
		}
		if ok {
			return s
		}
		if time.Now().After(deadline) {
			x.t.Fatalf("%s: the screen never showed %q:\n%s", what, want, s)
		}
		time.Sleep(20 * time.Millisecond) // another process's screen: no notification
	}
}

// TestTopUnderTmux: `warren top` in a real terminal (tmux) shows the team
// and its wait live; typed keys answer the wait, follow an agent's
// stream, cancel a turn and, after a kill -9 and a restart (top
// reconnects by itself), resume the interrupted run.
func TestTopUnderTmux(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, modeBinary)
	writeFile(t, filepath.Join(d.Home, "config.json"), `{"resume": "manual"}`)
	d.Start()
	script := writeScripts(t, d.dir)
	lead := d.createAgent("lead", "scripted", script, "")
	w1 := d.createAgent("w1", "scripted", script, lead)
	go func() {
		_, _ = d.Client().Call(procCtx(t), "agent.send", map[string]any{"agent_id": lead, "message": "ask ship the release?"})
	}()

	x := newTmux(t, procBinary, "--home", d.Home, "top")
	x.until("the team and its wait", "live", "lead", "w1", "1 waiting for you", "ship the release?")

	// Answer the lead's wait (the first row is selected).
	x.keys("a")
	x.until("the answer prompt", "answer lead's wait")
	x.keys("-l", "ship it")
	x.until("the typed answer", "ship it_")
	x.keys("Enter")
	waitEvent(t, d, lead, "the answered run's turn.complete", func(ev string, data map[string]any) bool {
		return ev == "turn.complete" && strings.Contains(mustJSON(t, data), "answer: ship it")
	})
	x.until("the answer's outcome", "answer lead: done", "0 waiting for you")

	// Follow the lead's stream.
	x.keys("Enter")
	x.until("the followed stream", "following lead", "turn.complete answer: ship it")
	x.keys("Escape")
	x.until("back to the list", "AGENT", "STATUS")

	// Cancel w1's turn.
	fifo := filepath.Join(d.dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	go func() {
		_, _ = d.Client().Call(procCtx(t), "agent.send", map[string]any{"agent_id": w1, "message": "fifo " + fifo})
	}()
	x.until("w1 running", "running")
	x.keys("Down", "c")
	waitEvent(t, d, w1, "turn.cancelled", func(ev string, _ map[string]any) bool { return ev == "turn.cancelled" })
	x.until("the cancel's outcome", "cancel lead/w1: done")

	// Kill -9 mid-turn; under manual the run is left interrupted; top
	// reconnects and resumes it.
	go func() {
		_, _ = d.Client().Call(procCtx(t), "agent.send", map[string]any{"agent_id": w1, "message": "fifo " + fifo})
	}()
	waitEvent(t, d, w1, "the second turn.start", func(ev string, data map[string]any) bool {
		return ev == "turn.start" && strings.Contains(mustJSON(t, data), "fifo") && strings.Count(readLog(t, d, w1), `"event":"turn.start"`) == 2
	})
	d.Kill()
	d.Start()
	x.until("the interrupted run after the restart", "live", "interrupted")
	x.keys("r")
	waitEvent(t, d, w1, "run.resumed", func(ev string, data map[string]any) bool { return ev == "run.resumed" })
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write([]byte("go on"))
	w.Close()
	waitEvent(t, d, w1, "the resumed run's turn.complete", func(ev string, data map[string]any) bool {
		return ev == "turn.complete" && strings.Contains(mustJSON(t, data), "fifo: go on")
	})
	x.until("the resume's outcome", "resume lead/w1: done")
	x.keys("q")
}
