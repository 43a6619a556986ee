package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/warren-dev/warren/cmd/warren/internal/exit"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
)

func TestUsageErrorsExit2(t *testing.T) {
	home := shortHome(t)
	cases := [][]string{
		{},
		{"frobnicate"},
		{"agent"},
		{"agent", "dance"},
		{"daemon"},
		{"agent", "create", "--home", home},
		{"agent", "send", "lead", "--home", home},
		{"agent", "inspect", "a", "b", "--home", home},
		{"agent", "list", "--bogus", "--home", home},
		{"daemon", "start", "--max-slots", "many", "--home", home},
		{"daemon", "start", "--log-level", "loud", "--home", home},
		{"agent", "create", "x", "--metadata", "novalue", "--home", home},
		{"logs", "--home", home},
		{"--home"},
	}
	for _, args := range cases {
		r := warren(t, args...)
		if r.code != exit.Usage {
			t.Errorf("warren %q: exit %d, want %d (stderr %q)", args, r.code, exit.Usage, r.stderr)
			continue
		}
		if !strings.Contains(r.stderr, "error: ") || r.stdout != "" && len(args) > 0 {
			t.Errorf("warren %q: want an error on stderr and nothing on stdout, got stdout %q stderr %q", args, r.stdout, r.stderr)
		}
		if len(args) > 0 && !strings.Contains(r.stderr, "usage: ") {
			t.Errorf("warren %q: stderr has no usage line: %q", args, r.stderr)
		}
	}
}

func TestDaemonNotRunningExit3(t *testing.T) {
	home := shortHome(t)
	for _, args := range [][]string{
		{"agent", "list"},
		{"daemon", "status"},
		{"daemon", "stop"},
		{"agent", "send", "lead", "hi"},
		{"inbox", "--json"},
		{"events"},
	} {
		r := warren(t, append(args, "--home", home)...)
		want := "error: daemon not running (no socket at " + filepath.Join(home, "daemon.sock") + "); start it with: warren daemon start --home " + home + "\n"
		if r.code != exit.NotRunning || !strings.Contains(r.stderr, want) {
			t.Errorf("warren %q: exit %d stderr %q; want exit 3 and %q", args, r.code, r.stderr, want)
		}
		if r.stdout != "" {
			t.Errorf("warren %q: stdout %q, want nothing", args, r.stdout)
		}
	}
	// WARREN_HOME is used when --home is absent.
	cmd := exec.Command(warrenBin, "agent", "list")
	cmd.Env = append(testEnv(t), "WARREN_HOME="+home)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exit.NotRunning || !strings.Contains(string(out), home) ||
		!strings.HasSuffix(string(out), "start it with: warren daemon start\n") {
		t.Errorf("WARREN_HOME=%s warren agent list: err %v output %q; want exit 3 naming the home, a hint without --home", home, err, out)
	}
}

// TestStaleSocketReportedAsStale: a socket file nobody listens on (a
// daemon killed with -9) is reported as stale, not as "no socket".
func TestStaleSocketReportedAsStale(t *testing.T) {
	home := shortHome(t)
	sock := filepath.Join(home, "daemon.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	r := warren(t, "agent", "list", "--home", home)
	if r.code != exit.NotRunning || !strings.Contains(r.stderr, "stale socket at "+sock) || strings.Contains(r.stderr, "no socket") {
		t.Errorf("warren agent list with a stale socket: exit %d stderr %q; want exit 3 and 'stale socket at %s'", r.code, r.stderr, sock)
	}
}

func TestVersionAndHelp(t *testing.T) {
	if out := mustOK(t, "version"); !strings.Contains(out, version) {
		t.Errorf("warren version = %q, want it to contain %q", out, version)
	}
	if v := mustJSON(t, "version"); v["version"] != version {
		t.Errorf("warren version --json = %v", v)
	}
	if out := mustOK(t, "help"); !strings.Contains(out, "warren logs REF [-f]") {
		t.Errorf("warren help lacks the command list: %q", out)
	}
	if out := mustOK(t, "--help"); !strings.Contains(out, "warren logs REF [-f]") {
		t.Errorf("warren --help lacks the command list: %q", out)
	}
	if out := mustOK(t, "agent", "send", "-h"); !strings.Contains(out, "Usage:\n  warren agent send REF (MESSAGE | - | --file PATH)") || !strings.Contains(out, "--provider") {
		t.Errorf("warren agent send -h = %q", out)
	}
}

const (
	leadID   = "0123456789abcdef0123456789abcdef"
	workerID = "fedcba9876543210fedcba9876543210"
)

// writeTeam writes the logs of lead and lead/w1 directly (no daemon) and
// returns the worker's open log.
func writeTeam(t *testing.T, home string) *eventlog.Log {
	t.Helper()
	lead := openLog(t, home, leadID)
	appendOK(t, lead, "agent.created", map[string]any{"agent_id": leadID, "name": "lead", "parent_id": nil, "instructions": "", "provider": "inproc", "model": "echo", "metadata": map[string]any{}})
	appendOK(t, lead, "turn.start", map[string]any{"run_id": "r1", "turn": 1, "prompt": "hello there"})
	lead.Close()
	w := openLog(t, home, workerID)
	appendOK(t, w, "agent.created", map[string]any{"agent_id": workerID, "name": "w1", "parent_id": leadID, "instructions": "", "provider": "inproc", "model": "echo", "metadata": map[string]any{}})
	return w
}

func openLog(t *testing.T, home, id string) *eventlog.Log {
	t.Helper()
	l, err := eventlog.Open(faultfs.OS{}, filepath.Join(home, "agents", id, "events.jsonl"), eventlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func appendOK(t *testing.T, l *eventlog.Log, event string, data any) {
	t.Helper()
	if _, err := l.Append(event, data); err != nil {
		t.Fatal(err)
	}
}

func TestLogsReadsFilesWithoutDaemon(t *testing.T) {
	home := shortHome(t)
	w := writeTeam(t, home)
	appendOK(t, w, "message.enqueued", map[string]any{"message_id": "m1", "payload": strings.Repeat("x", 500)})
	w.Close()

	for _, ref := range []string{"lead/w1", "w1", workerID} {
		out := mustOK(t, "logs", ref, "--home", home)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 2 || !strings.Contains(lines[0], "  #1  agent.created  ") || !strings.Contains(lines[1], "  #2  message.enqueued  ") {
			t.Fatalf("warren logs %s:\n%s", ref, out)
		}
		if !strings.Contains(lines[0], "name=w1") || !strings.Contains(lines[0], "parent_id="+leadID) {
			t.Errorf("warren logs %s: first line lacks k=v data: %q", ref, lines[0])
		}
		if len(lines[1]) > 200 || !strings.Contains(lines[1], "…") {
			t.Errorf("warren logs %s: a 500-char value is not cut: %d chars", ref, len(lines[1]))
		}
	}
	// --json: one raw entry per line.
	out := mustOK(t, "logs", "lead", "--json", "--home", home)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("warren logs lead --json: %q", out)
	}
	var e struct {
		Seq   uint64         `json:"seq"`
		Event string         `json:"event"`
		Data  map[string]any `json:"data"`
	}
	if err := json.Unmarshal([]byte(lines[1]), &e); err != nil || e.Seq != 2 || e.Event != "turn.start" || e.Data["prompt"] != "hello there" {
		t.Errorf("warren logs --json line 2 = %q (%v)", lines[1], err)
	}
	for _, ref := range []string{"nobody", "00000000000000000000000000000000"} {
		if r := warren(t, "logs", ref, "--home", home); r.code != exit.DaemonErr || !strings.Contains(r.stderr, "no such agent") {
			t.Errorf("warren logs %s: exit %d stderr %q, want exit 1 and 'no such agent'", ref, r.code, r.stderr)
		}
	}
}

func TestLogsFollowPrintsAppendedLines(t *testing.T) {
	home := shortHome(t)
	w := writeTeam(t, home)
	defer w.Close()

	cmd := exec.Command(warrenBin, "logs", "-f", "lead/w1", "--home", home)
	cmd.Env = testEnv(t)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewReader(stdout)
	readLine := func(want string) {
		t.Helper()
		l, err := lines.ReadString('\n')
		if err != nil {
			t.Fatalf("logs -f: read: %v (stderr %q)", err, stderr.String())
		}
		if !strings.Contains(l, want) {
			t.Fatalf("logs -f printed %q, want %q", l, want)
		}
	}
	readLine("#1  agent.created")
	for i, ev := range []string{"turn.start", "turn.complete", "message.enqueued"} {
		appendOK(t, w, ev, map[string]any{"n": i})
		readLine(ev)
	}
	// A torn line is not printed; completing it later is not either (only
	// whole CRC-valid entries count), and the next good entry is.
	f, err := os.OpenFile(w.Path(), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"seq":5,"ts":"2026-11-22T10:01:10.123Z","event":"half`); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(lines)
	if err := cmd.Wait(); err != nil {
		t.Errorf("logs -f after Ctrl-C: %v (stderr %q)", err, stderr.String())
	}
	if strings.Contains(string(rest), "half") {
		t.Errorf("logs -f printed a torn line: %q", rest)
	}
}

func TestRepairCutsCorruptLog(t *testing.T) {
	home := shortHome(t)
	w := writeTeam(t, home)
	for i := range 3 {
		appendOK(t, w, "turn.start", map[string]any{"n": i})
	}
	w.Close()
	path := filepath.Join(home, "agents", workerID, "events.jsonl")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	lines[2] = strings.Replace(lines[2], "turn.start", "turn.stXrt", 1) // CRC no longer matches
	if err := os.WriteFile(path, []byte(strings.Join(lines, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := warren(t, "logs", "w1", "--home", home); r.code != exit.DaemonErr || !strings.Contains(r.stderr, "warren repair") {
		t.Errorf("logs on a corrupt log: exit %d stderr %q; want exit 1 pointing at warren repair", r.code, r.stderr)
	}
	rep := mustJSON(t, "repair", "lead/w1", "--home", home)
	backup, _ := rep["backup"].(string)
	if rep["kept_entries"] != float64(2) || rep["first_bad_line"] != float64(3) || backup == "" {
		t.Fatalf("repair --json = %v", rep)
	}
	if b, err := os.ReadFile(backup); err != nil || string(b) != strings.Join(lines, "") {
		t.Errorf("the backup %s does not hold the damaged log (err %v)", backup, err)
	}
	out := mustOK(t, "logs", "w1", "--home", home)
	if n := strings.Count(out, "\n"); n != 2 {
		t.Errorf("after repair logs shows %d lines, want 2:\n%s", n, out)
	}
	if out := mustOK(t, "repair", "w1", "--home", home); !strings.Contains(out, "healthy") {
		t.Errorf("repair of a healthy log says %q", out)
	}
}
