package main

import (
	"bufio"
	"encoding/json"
	"github.com/warren-dev/warren/homedir"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/warren-dev/warren/cmd/warren/internal/exit"
)

// startDaemon starts a background daemon with `warren daemon start` and
// stops it when the test ends.
func startDaemon(t *testing.T, home string) {
	t.Helper()
	out := mustOK(t, "daemon", "start", "--home", home)
	if !strings.HasPrefix(out, "daemon started (pid ") {
		t.Fatalf("daemon start printed %q", out)
	}
	t.Cleanup(func() {
		if _, err := os.Stat(homedir.SocketPath(home)); err != nil {
			return
		}
		r := warren(t, "daemon", "stop", "--home", home)
		if r.code != 0 {
			// Last resort: kill the pid the daemon wrote.
			if b, err := os.ReadFile(filepath.Join(home, "daemon.pid")); err == nil {
				if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			t.Errorf("daemon stop in cleanup: exit %d %s", r.code, r.stderr)
		}
	})
}

func TestDaemonLifecycle(t *testing.T) {
	t.Parallel()
	home := shortHome(t)
	startDaemon(t, home)

	r := warren(t, "daemon", "start", "--home", home)
	if r.code != exit.DaemonErr || !strings.Contains(r.stderr, "already running") {
		t.Errorf("second daemon start: exit %d stderr %q; want exit 1 'already running'", r.code, r.stderr)
	}
	st := mustJSON(t, "daemon", "status", "--home", home)
	for _, k := range []string{"pid", "boot_id", "version", "uptime_s", "agents", "pools"} {
		if _, ok := st[k]; !ok {
			t.Errorf("daemon status --json lacks %q: %v", k, st)
		}
	}
	out := mustOK(t, "daemon", "status", "--home", home)
	for _, want := range []string{"running", "boot id", "uptime", "agents", "POOL"} {
		if !strings.Contains(out, want) {
			t.Errorf("daemon status lacks %q:\n%s", want, out)
		}
	}
	pid := int(st["pid"].(float64))
	if out := mustOK(t, "daemon", "stop", "--home", home); !strings.Contains(out, "daemon stopped") {
		t.Errorf("daemon stop printed %q", out)
	}
	if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
		t.Errorf("daemon pid %d still exists after stop (kill 0: %v)", pid, err)
	}
	if r := warren(t, "daemon", "status", "--home", home); r.code != exit.NotRunning {
		t.Errorf("status after stop: exit %d, want 3", r.code)
	}
}

func TestDaemonStartFailureShowsLog(t *testing.T) {
	// A home whose socket path is too long makes the daemon fail at start:
	// the client prints the tail of daemon.log and exits 1.
	home := filepath.Join(shortHome(t), strings.Repeat("h", 110))
	r := warren(t, "daemon", "start", "--home", home)
	if r.code != exit.DaemonErr || !strings.Contains(r.stderr, "daemon.log") {
		t.Errorf("daemon start with a too long socket path: exit %d stderr %q; want exit 1 with the log tail", r.code, r.stderr)
	}
}

func TestAgentRoundTrip(t *testing.T) {
	t.Parallel()
	home := shortHome(t)
	startDaemon(t, home)
	h := []string{"--home", home}
	args := func(a ...string) []string { return append(a, h...) }

	created := mustJSON(t, args("agent", "create", "lead", "--provider", "inproc", "--model", "echo", "--instructions", "lead the team")...)
	leadID, _ := created["agent_id"].(string)
	if len(leadID) != 32 || created["name"] != "lead" {
		t.Fatalf("agent create --json = %v", created)
	}
	out := mustOK(t, args("agent", "create", "w1", "--parent", "lead", "--provider", "inproc", "--model", "echo", "--metadata", "role=worker", "--metadata", "n=1")...)
	if f := strings.Fields(out); len(f) != 2 || len(f[0]) != 32 || f[1] != "w1" {
		t.Errorf("agent create printed %q, want '<id>  w1'", out)
	}
	if r := warren(t, args("agent", "create", "w1", "--parent", "lead")...); r.code != exit.DaemonErr || !strings.HasPrefix(r.stderr, "error: ") {
		t.Errorf("duplicate child name: exit %d stderr %q, want exit 1", r.code, r.stderr)
	}

	list := mustOK(t, args("agent", "list")...)
	lines := strings.Split(strings.TrimSpace(list), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "PATH") || !strings.HasPrefix(lines[1], "lead ") || !strings.HasPrefix(lines[2], "lead/w1 ") {
		t.Fatalf("agent list:\n%s", list)
	}
	if strings.Index(lines[0], "STATUS") != strings.Index(lines[1], "idle") {
		t.Errorf("agent list columns are not aligned:\n%s", list)
	}
	lj := mustJSON(t, args("agent", "list")...)
	if as, _ := lj["agents"].([]any); len(as) != 2 {
		t.Errorf("agent list --json = %v", lj)
	}

	tree := mustOK(t, args("agent", "tree")...)
	if want := "lead  [idle]\n└── w1  [idle]\n"; tree != want {
		t.Errorf("agent tree = %q, want %q", tree, want)
	}

	insp := mustOK(t, args("agent", "inspect", "lead")...)
	for _, want := range []string{"agent_id:  " + leadID, "status:    idle", "children:", "w1  [idle]"} {
		if !strings.Contains(insp, want) {
			t.Errorf("agent inspect lacks %q:\n%s", want, insp)
		}
	}
	ij := mustJSON(t, args("agent", "inspect", "lead/w1")...)
	if ij["name"] != "w1" || ij["parent_id"] != leadID {
		t.Errorf("agent inspect --json = %v", ij)
	}

	if out := mustOK(t, args("agent", "send", "lead/w1", "hello there")...); out != "echo: hello there\n" {
		t.Errorf("agent send printed %q", out)
	}
	sj := mustJSON(t, args("agent", "send", "w1", "again")...)
	if sj["response"] != "echo: again" || sj["run_id"] == "" {
		t.Errorf("agent send --json = %v", sj)
	}
	if r := warren(t, args("agent", "send", "nobody", "hi")...); r.code != exit.DaemonErr || r.stdout != "" {
		t.Errorf("send to an unknown agent: exit %d stdout %q, want exit 1", r.code, r.stdout)
	}

	if r := warren(t, args("agent", "terminate", "lead")...); r.code != exit.DaemonErr {
		t.Errorf("terminate a parent with children: exit %d, want 1", r.code)
	}
	if out := mustOK(t, args("agent", "terminate", "lead/w1")...); !strings.HasPrefix(out, "terminated ") {
		t.Errorf("agent terminate printed %q", out)
	}
	if out := mustOK(t, args("inbox")...); out != "no messages\n" {
		t.Errorf("inbox printed %q", out)
	}
	if ib := mustJSON(t, args("inbox")...); ib["messages"] == nil {
		t.Errorf("inbox --json = %v", ib)
	}

	// logs reads the files; it works with the daemon running and stopped.
	running := mustOK(t, args("logs", "lead/w1")...)
	mustOK(t, args("daemon", "stop")...)
	stopped := mustOK(t, args("logs", "lead/w1")...)
	if running != stopped || !strings.Contains(stopped, "agent.created") || !strings.Contains(stopped, "turn.complete") || !strings.Contains(stopped, "agent.terminated") {
		t.Errorf("logs with the daemon stopped:\n%s\nwhile running:\n%s", stopped, running)
	}
	var e map[string]any
	first := strings.SplitN(mustOK(t, args("logs", leadID, "--json")...), "\n", 2)[0]
	if err := json.Unmarshal([]byte(first), &e); err != nil || e["event"] != "agent.created" {
		t.Errorf("logs --json first line %q (%v)", first, err)
	}
}

func TestAttachStreamsReplies(t *testing.T) {
	t.Parallel()
	home := shortHome(t)
	startDaemon(t, home)
	mustOK(t, "agent", "create", "solo", "--provider", "inproc", "--model", "echo", "--home", home)
	cmd := exec.Command(warrenBin, "agent", "attach", "solo", "--home", home)
	cmd.Env = testEnv(t)
	cmd.Stdin = strings.NewReader("first\nsecond\n\nnot sent\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("attach: %v\n%s", err, out)
	}
	s := string(out)
	for _, want := range []string{"attached to solo", "echo: first", "echo: second", "detached"} {
		if !strings.Contains(s, want) {
			t.Errorf("attach output lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "not sent") {
		t.Errorf("attach sent a line after the empty line:\n%s", s)
	}
}

func TestDemoPasses(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(warrenBin, "demo")
	cmd.Env = testEnv(t)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("warren demo: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "✗") || !strings.Contains(string(out), "demo passed") {
		t.Errorf("warren demo output:\n%s", out)
	}
}

// askScript is a scripted-provider program: every turn asks for approval
// with await_input and answers with the response it gets.
const askScript = `#!/bin/sh
while read -r line; do
  case "$line" in *'"type":"turn"'*|*'"type": "turn"'*) ;; *) continue ;; esac
  echo '{"type":"call","id":"1","tool":"await_input","args":{"kind":"approval","prompt":"ok to proceed?","timeout":600}}'
  read -r res
  resp=$(printf '%s' "$res" | sed -n 's/.*"response": *"\([^"]*\)".*/\1/p')
  echo "{\"type\":\"done\",\"response\":\"approved: $resp\"}"
done
`

func TestSendSuspendedPrintsResumeCommand(t *testing.T) {
	t.Parallel()
	home := shortHome(t)
	script := filepath.Join(home, "ask.sh")
	if err := os.WriteFile(script, []byte(askScript), 0o700); err != nil {
		t.Fatal(err)
	}
	startDaemon(t, home)
	mustOK(t, "agent", "create", "a", "--provider", "scripted", "--model", script, "--home", home)

	out := mustOK(t, "agent", "send", "a", "deploy", "--home", home)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || lines[0] != "a is waiting for input (approval): ok to proceed?" {
		t.Fatalf("agent send on a suspending run printed:\n%s", out)
	}
	cmdline := strings.Fields(lines[1])
	// resume with: warren agent resume a --home H --token T RESPONSE
	if len(cmdline) != 11 || strings.Join(cmdline[:7], " ") != "resume with: warren agent resume a --home" ||
		cmdline[7] != home || cmdline[8] != "--token" || cmdline[10] != "RESPONSE" {
		t.Fatalf("resume line %q", lines[1])
	}
	token := cmdline[9]
	tokenID, secret, ok := strings.Cut(token, ".")
	if !ok || secret == "" {
		t.Fatalf("token %q has no secret part", token)
	}
	// The wait's public id, and the command that answers it by id.
	if lines[2] != "token id: "+tokenID ||
		lines[3] != "or by token id: warren agent resume a --home "+home+" --token-id "+tokenID+" RESPONSE" {
		t.Fatalf("token id lines:\n%s\n%s", lines[2], lines[3])
	}

	if list := mustOK(t, "agent", "list", "--home", home); !strings.Contains(list, "suspended") || !strings.Contains(list, "a is waiting: ok to proceed?") {
		t.Errorf("agent list does not show the wait:\n%s", list)
	}
	insp := mustOK(t, "agent", "inspect", "a", "--home", home)
	if !strings.Contains(insp, "token_id:") || !strings.Contains(insp, "prompt:    ok to proceed?") || strings.Contains(insp, secret) {
		t.Errorf("agent inspect must show the wait and never the secret:\n%s", insp)
	}
	if r := warren(t, "agent", "inspect", "a", "--json", "--home", home); strings.Contains(r.stdout, secret) {
		t.Errorf("agent inspect --json shows the secret: %s", r.stdout)
	}

	// The printed command, as printed, resumes the run.
	args := append(cmdline[3:10:10], "yes")
	if out := mustOK(t, args...); out != "approved: yes\n" {
		t.Errorf("warren %s printed %q, want the agent's response", strings.Join(args, " "), out)
	}
	if r := warren(t, "agent", "resume", "a", "--token", token+"x", "again", "--home", home); r.code != exit.DaemonErr {
		t.Errorf("resume with a wrong token: exit %d, want 1", r.code)
	}
	sj := mustJSON(t, "agent", "send", "a", "again", "--home", home)
	if sj["status"] != "suspended" || sj["token"] == "" || sj["wait"] == nil {
		t.Errorf("agent send --json on a suspending run = %v", sj)
	}
	if out := mustOK(t, "agent", "cancel", "a", "--home", home); !strings.HasPrefix(out, "cancelled ") {
		t.Errorf("agent cancel printed %q", out)
	}
	if st := mustJSON(t, "agent", "inspect", "a", "--home", home); st["status"] != "idle" || st["wait"] != nil {
		t.Errorf("after cancel inspect = %v, want idle without a wait", st)
	}
}

func TestEventsStreamsLive(t *testing.T) {
	t.Parallel()
	home := shortHome(t)
	startDaemon(t, home)
	mustOK(t, "agent", "create", "solo", "--provider", "inproc", "--model", "echo", "--home", home)

	cmd := exec.Command(warrenBin, "events", "-f", "--since", "0", "solo", "--home", home)
	cmd.Env = testEnv(t)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(stdout)
	expect := func(want string) {
		t.Helper()
		for lines.Scan() {
			if strings.Contains(lines.Text(), want) {
				return
			}
		}
		t.Fatalf("events ended before a line with %q (%v)", want, lines.Err())
	}
	// --since 0 replays the log: the creation comes first, with the path.
	expect("  solo  #1  agent.created  ")
	// Then live events: a send is seen as it happens.
	mustOK(t, "agent", "send", "solo", "ping", "--home", home)
	expect("turn.complete")
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("events after Ctrl-C: %v", err)
	}
}

// tellScript sends USER a message on every turn.
const tellScript = `#!/bin/sh
while read -r line; do
  case "$line" in *'"type":"turn"'*|*'"type": "turn"'*) ;; *) continue ;; esac
  echo '{"type":"call","id":"1","tool":"send_message","args":{"recipient":"USER","text":"hi boss"}}'
  read -r res
  echo '{"type":"done","response":"told"}'
done
`

func TestInboxDrainsUserMessages(t *testing.T) {
	t.Parallel()
	home := shortHome(t)
	script := filepath.Join(home, "tell.sh")
	if err := os.WriteFile(script, []byte(tellScript), 0o700); err != nil {
		t.Fatal(err)
	}
	startDaemon(t, home)
	mustOK(t, "agent", "create", "boss", "--provider", "scripted", "--model", script, "--home", home)
	mustOK(t, "agent", "send", "boss", "report", "--home", home)
	out := mustOK(t, "inbox", "--home", home)
	f := strings.SplitN(strings.TrimSpace(out), "  ", 3)
	if len(f) != 3 || len(f[0]) != len("15:04:05") || f[1] != "from=boss" || f[2] != "hi boss" {
		t.Errorf("inbox printed %q, want 'HH:MM:SS  from=boss  hi boss'", out)
	}
	if out := mustOK(t, "inbox", "--home", home); out != "no messages\n" {
		t.Errorf("inbox after draining printed %q", out)
	}
}

func TestCorruptAgentListedThenRepaired(t *testing.T) {
	t.Parallel()
	home := shortHome(t)
	startDaemon(t, home)
	created := mustJSON(t, "agent", "create", "solo", "--provider", "inproc", "--model", "echo", "--home", home)
	mustOK(t, "agent", "create", "other", "--provider", "inproc", "--model", "echo", "--home", home)
	mustOK(t, "agent", "send", "solo", "one", "--home", home)
	mustOK(t, "daemon", "stop", "--home", home)

	path := filepath.Join(home, "agents", created["agent_id"].(string), "events.jsonl")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	if len(lines) < 4 {
		t.Fatalf("log too short to damage: %q", data)
	}
	lines[1] = strings.Replace(lines[1], `"seq":2`, `"seq":9`, 1) // damage in the middle
	if err := os.WriteFile(path, []byte(strings.Join(lines, "")), 0o600); err != nil {
		t.Fatal(err)
	}

	startDaemon(t, home)
	list := mustOK(t, "agent", "list", "--home", home)
	if !strings.Contains(list, "corrupt") || !strings.Contains(list, "warren repair") || !strings.Contains(list, "other") {
		t.Fatalf("agent list with a corrupt log:\n%s", list)
	}
	// While the daemon runs, repair refuses and says what to do (issue 14),
	// leaving the log as it was.
	r := warren(t, "repair", "solo", "--home", home)
	if r.code != exit.DaemonErr || !strings.Contains(r.stderr, "daemon is running") ||
		!strings.Contains(r.stderr, "warren daemon stop --home "+home) || !strings.Contains(r.stderr, "warren repair solo --home "+home) {
		t.Errorf("repair with the daemon running: exit %d stderr %q; want exit 1 saying stop, repair, start", r.code, r.stderr)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != strings.Join(lines, "") {
		t.Errorf("repair refused while running still changed the log (err %v)", err)
	}
	mustOK(t, "daemon", "stop", "--home", home)
	if out := mustOK(t, "repair", "solo", "--home", home); !strings.Contains(out, "copy of the damaged log:") {
		t.Errorf("repair printed:\n%s", out)
	}
	startDaemon(t, home)
	if st := mustJSON(t, "agent", "inspect", "solo", "--home", home); st["status"] == "corrupt" {
		t.Errorf("after repair the agent is still corrupt: %v", st)
	}
}
