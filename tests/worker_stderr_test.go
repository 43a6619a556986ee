package tests

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestWorkerAgentStderrReachesTheDaemon: what an agent's process on a
// worker writes to stderr is kept in the worker's own stderr.log and
// reaches the daemon's, where `warren logs --stderr` reads it, as for an
// agent the daemon runs itself.
func TestWorkerAgentStderrReachesTheDaemon(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test starts a daemon and a warren worker process; run without -short")
	}
	f := startWorkerFleet(t, 1, 2, "")
	d := f.d
	script := filepath.Join(d.dir, "noisy")
	if err := os.WriteFile(script, []byte("#!"+procPython+"\nimport os, sys\n"+
		"sys.path.insert(0, "+strconv.Quote(filepath.Dir(f.script))+")\nfrom warren_script import read_turn, done\n"+
		"while True:\n    msg = read_turn()\n    sys.stderr.write('noisy: ' + msg + '\\n'); sys.stderr.flush()\n    done('heard: ' + msg)\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	id := d.createAgent("bot", "scripted", script, "")
	if r := d.callN("agent.send", map[string]any{"agent_id": id, "message": "hello"}); str(r["response"]) != "heard: hello" {
		t.Fatalf("send: %v", r)
	}
	if !strings.Contains(d.Output(), "session placed") || !strings.Contains(d.Output(), "worker=w1") {
		t.Fatalf("the agent's session was not placed on the worker:\n%s", tailString(d.Output(), 4000))
	}
	onWorker := filepath.Join(f.workers["w1"].home, "worker-w1", "agents", id, "stderr.log")
	deadline := time.Now().Add(30 * time.Second)
	for {
		out := runCLI(t, d.Home, "logs", "--stderr", "bot").want(t, 0, "logs --stderr").stdout
		if strings.Contains(out, "noisy: hello") {
			break
		}
		if time.Now().After(deadline) {
			kept, _ := os.ReadFile(onWorker)
			t.Fatalf("warren logs --stderr bot on the daemon's home, 30 s after the turn:\n%q\n(the worker's own stderr.log: %q)", out, kept)
		}
		time.Sleep(100 * time.Millisecond) // the copy is sent after the turn's answer; nothing signals its arrival
	}
	if kept, err := os.ReadFile(onWorker); err != nil || !strings.Contains(string(kept), "noisy: hello") {
		t.Fatalf("the worker's own stderr.log: %q, %v", kept, err)
	}
}
