package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestStandbyWithTheCLI: a second daemon joining the first one's cluster
// stands by, and the CLI works on it as on any daemon (SPEC 9): daemon
// start returns saying so and naming the active node, daemon status shows
// the role, other commands are refused naming the active node, daemon
// stop stops it. On the active node's cluster home, warren logs reads an
// agent's log through the daemon (no log files on disk) and --stderr
// shows what its process wrote.
func TestStandbyWithTheCLI(t *testing.T) {
	port := freePorts(t, 1)[0]
	homeA, homeB := newTestDaemon(t, modeBinary).Home, newTestDaemon(t, modeBinary).Home
	t.Cleanup(func() {
		runCLI(t, homeB, "daemon", "stop")
		runCLI(t, homeA, "daemon", "stop")
	})
	start := runCLI(t, homeA, "daemon", "start", "--cluster-embedded", "--node", "na", "--nats-port", strconv.Itoa(port)).want(t, 0, "start the active node")
	if !strings.Contains(start.stdout, "daemon started") || strings.Contains(start.stdout, "standby") {
		t.Fatalf("first daemon: %q", start.stdout)
	}
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	// B's provider entries differ from A's: each status says so.
	if err := os.MkdirAll(homeB, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(homeB, "config.json"), []byte(`{"providers":{"scripted":{"env":{"ONLY_ON_B":"1"}}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// A's server lets in only A's key: without it B is refused, saying
	// what to do; with A's workers.json copied (as docs/CLUSTER.md says)
	// B joins.
	nokey := runCLI(t, homeB, "daemon", "start", "--cluster", url, "--node", "nb", "--unsafe-lazy-fsync")
	if nokey.code == 0 || !strings.Contains(nokey.stderr, "workers.json") {
		t.Fatalf("a standby without the cluster's key: exit %d, %q; want a refusal naming workers.json", nokey.code, nokey.stderr)
	}
	keys, err := os.ReadFile(filepath.Join(homeA, "workers.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(homeB, "workers.json"), keys, 0o600); err != nil {
		t.Fatal(err)
	}
	// B joins A's server as a client: it cannot ask the system account
	// whether the server fsyncs (A's embedded server does).
	start = runCLI(t, homeB, "daemon", "start", "--cluster", url, "--node", "nb", "--unsafe-lazy-fsync").want(t, 0, "start a standby")
	if !strings.Contains(start.stdout, "standby") || !strings.Contains(start.stdout, "node na") {
		t.Fatalf("daemon start of the standby: %q, want it to say it stands by and name node na", start.stdout)
	}
	st := runCLI(t, homeB, "daemon", "status", "--json").want(t, 0, "status of the standby").json(t)
	cl, _ := st["cluster"].(map[string]any)
	if cl["role"] != "standby" || cl["node"] != "nb" || cl["active_node"] != "na" || fmt.Sprint(cl["config_differs"]) != "[na]" {
		t.Fatalf("standby status cluster block: %v (want role standby, active na, config differing from na's)", st["cluster"])
	}
	if out := runCLI(t, homeB, "daemon", "status").want(t, 0, "status").stdout; !strings.Contains(out, "node nb, standby; active node na") {
		t.Fatalf("daemon status of the standby:\n%s", out)
	}
	refused := runCLI(t, homeB, "agent", "list").want(t, 1, "agent list on a standby")
	if !strings.Contains(refused.stderr, "stands by") || !strings.Contains(refused.stderr, "node na") {
		t.Fatalf("agent list on the standby: %q", refused.stderr)
	}
	if again := runCLI(t, homeB, "daemon", "start", "--cluster", url, "--node", "nb", "--unsafe-lazy-fsync"); again.code == 0 || !strings.Contains(again.stderr, "already running") {
		t.Fatalf("a second start of the standby: %d %q", again.code, again.stderr)
	}
	runCLI(t, homeB, "daemon", "stop").want(t, 0, "stop the standby")
	if _, err := os.Stat(filepath.Join(homeB, "warren.sock")); err == nil {
		t.Fatal("the standby's socket is still there after daemon stop")
	}
	if r := runCLI(t, homeB, "daemon", "status"); r.code != 3 {
		t.Fatalf("status after stop: exit %d, want 3 (not running)\n%s%s", r.code, r.stdout, r.stderr)
	}

	// The active node: a cluster home has no log files; warren logs reads
	// the store through the daemon.
	st = runCLI(t, homeA, "daemon", "status", "--json").want(t, 0, "status of the active node").json(t)
	if cl, _ := st["cluster"].(map[string]any); cl["role"] != "active" || cl["node"] != "na" || cl["active_node"] != "na" || fmt.Sprint(cl["config_differs"]) != "[nb]" {
		t.Fatalf("active status cluster block: %v", st["cluster"])
	}
	script := filepath.Join(homeA, "noisy")
	if err := os.WriteFile(script, []byte("#!"+procPython+"\nimport sys\nsys.stderr.write('noisy on stderr\\n'); sys.stderr.flush()\n"+
		"sys.path.insert(0, "+strconv.Quote(filepath.Dir(writeScripts(t, homeA)))+")\nfrom warren_script import read_turn, done\nwhile True:\n    done('heard: ' + read_turn())\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	runCLI(t, homeA, "agent", "create", "bot", "--provider", "scripted", "--model", script).want(t, 0, "create")
	if out := runCLI(t, homeA, "agent", "send", "bot", "hello").want(t, 0, "send").stdout; !strings.Contains(out, "heard: hello") {
		t.Fatalf("send: %q", out)
	}
	logs := runCLI(t, homeA, "logs", "bot").want(t, 0, "logs on a cluster home").stdout
	for _, want := range []string{"agent.created", "turn.start", "turn.complete", "heard: hello"} {
		if !strings.Contains(logs, want) {
			t.Fatalf("warren logs bot on a cluster home lacks %q:\n%s", want, logs)
		}
	}
	if out := runCLI(t, homeA, "logs", "--stderr", "bot").want(t, 0, "logs --stderr").stdout; !strings.Contains(out, "noisy on stderr") {
		t.Fatalf("warren logs --stderr bot on a cluster home:\n%s", out)
	}
}
