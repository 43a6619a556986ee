package tests

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/builtins"
	"github.com/warren-dev/warren/daemon"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/protocol"
)

// TestSocketSecondDaemonAlreadyRunning starts a second daemon on a home
// that has one, both as the binary and in-process: it fails with "already
// running" and the first keeps serving, with the same boot_id.
func TestSocketSecondDaemonAlreadyRunning(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode procMode) {
		t.Parallel()
		d := startTestDaemon(t, mode)
		d.createAgent("keep", "inproc", "echo", "")
		before := d.callN("daemon.status", nil)

		// The binary, in the foreground.
		ctx := procCtx(t)
		cmd := exec.CommandContext(ctx, procBinary, "daemon", "start", "--foreground", "--home", d.Home)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() == 0 {
			t.Fatalf("second binary daemon: err %v, want a non-zero exit\n%s", err, out.String())
		}
		if !strings.Contains(out.String(), "already running") {
			t.Fatalf("second binary daemon output lacks \"already running\":\n%s", out.String())
		}
		// In-process.
		err = daemon.Run(ctx, daemon.Options{Home: d.Home, Logger: hclog.NewNullLogger(), Providers: builtins.Providers,
			Ready: func(string) { t.Error("the second daemon must not serve") }})
		if !errors.Is(err, daemon.ErrAlreadyRunning) || !strings.Contains(err.Error(), "already running") {
			t.Fatalf("second in-process daemon: %v, want ErrAlreadyRunning", err)
		}
		// The first still serves, same boot, same agents, same socket.
		after := d.callN("daemon.status", nil)
		if after["boot_id"] != before["boot_id"] || after["pid"] != before["pid"] {
			t.Fatalf("daemon.status changed: before %v, after %v", before, after)
		}
		d.callN("agent.inspect", map[string]any{"agent_id": "keep"})
		if _, err := protocol.CallJSON(ctx, d.Sock, "agent.list", nil); err != nil {
			t.Fatalf("the first daemon stopped serving JSON: %v", err)
		}
		if _, err := os.Stat(filepath.Join(d.Home, "daemon.pid")); err != nil {
			t.Fatalf("the second daemon removed the first one's pid file: %v", err)
		}
	})
}

// blockScriptedTurn starts agent.send "fifo <path>" on a scripted agent in
// the background and returns once the turn runs (the script opened the
// FIFO), with the FIFO's write end (close it to let the turn finish) and
// the channel of the send's outcome.
func blockScriptedTurn(t *testing.T, d *testDaemon, agent string) (*os.File, chan error) {
	t.Helper()
	fifo := filepath.Join(d.dir, "fifo-"+agent)
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	res := make(chan error, 1)
	cl, err := protocol.Dial(context.Background(), d.Sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	go func() {
		_, err := cl.Call(context.Background(), "agent.send", map[string]any{"agent_id": agent, "message": "fifo " + fifo})
		res <- err
	}()
	// Opening the write end returns once the script has opened the read end.
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w, res
}

// TestSocketSigtermStopsGracefully sends SIGTERM (and SIGINT) to the binary
// while a scripted turn runs: the daemon exits 0, removes its socket and
// pid file, the running turn is interrupted (run.interrupted, shutdown;
// never turn.cancelled), the client gets code 6 rather than a hang, and
// the restart re-runs the run by itself (resume policy auto), which then
// completes once.
func TestSocketSigtermStopsGracefully(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			d := startTestDaemon(t, modeBinary)
			script := writeScripts(t, d.dir)
			id := d.createAgent("busy", "scripted", script, "")
			w, sendErr := blockScriptedTurn(t, d, "busy")
			if st := d.callN("agent.inspect", map[string]any{"agent_id": "busy"}); st["status"] != "running" {
				t.Fatalf("status during the turn = %v", st["status"])
			}
			d.Signal(sig)
			<-d.Exited()
			if err := d.exitErr(); err != nil {
				t.Fatalf("daemon exit after %v: %v\n%s", sig, err, d.Output())
			}
			w.Close()
			// The request in flight at the stop is answered "unavailable".
			wantCode(t, "agent.send in flight at "+sig.String(), <-sendErr, protocol.CodeUnavailable)
			for _, f := range []string{"daemon.sock", "daemon.pid"} {
				if _, err := os.Stat(filepath.Join(d.Home, f)); !os.IsNotExist(err) {
					t.Fatalf("%s still exists after %v: %v", f, sig, err)
				}
			}
			counts := eventCounts(t, d, id)
			if counts["turn.start"] != 1 || counts["turn.cancelled"] != 0 || counts["run.interrupted"] != 1 {
				t.Fatalf("log after %v: %v; want the running turn interrupted, never cancelled", sig, counts)
			}
			d.Start()
			finishFIFO(t, d, "busy") // the re-run opened the FIFO again
			waitEvent(t, d, id, "turn.complete", func(ev string, _ map[string]any) bool { return ev == "turn.complete" })
			counts = eventCounts(t, d, id)
			if counts["turn.complete"] != 1 || counts["run.interrupted"] != 1 || counts["run.resumed"] != 1 || counts["turn.cancelled"] != 0 {
				t.Fatalf("log after the restart: %v; want one re-run by the resume policy, completed once", counts)
			}
		})
	}
}

// eventCounts counts the events of agent id's log file.
func eventCounts(t *testing.T, d *testDaemon, id string) map[string]int {
	t.Helper()
	entries, err := eventlog.ReadAll(faultfs.OS{}, filepath.Join(d.Home, "agents", id, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, e := range entries {
		out[e.Event]++
	}
	return out
}

// finishFIFO lets the turn blocked on agent's FIFO (blockScriptedTurn)
// finish: it opens the write end (once the script has opened the read
// end) and closes it.
func finishFIFO(t *testing.T, d *testDaemon, agent string) {
	t.Helper()
	w, err := os.OpenFile(filepath.Join(d.dir, "fifo-"+agent), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write([]byte("done"))
	w.Close()
}
