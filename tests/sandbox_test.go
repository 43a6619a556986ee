package tests

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warren-dev/warren/protocol"
)

// probeScript is a sandboxed agent that tries to get out. Its message is
// "probe <json>"; it tries each thing the JSON lists and answers with a
// JSON object, thing -> "ok" or "denied: <why>":
//
//	read, write        paths to read or write (read:PATH, write:PATH)
//	glob               a pattern to list (glob: "N matches")
//	unix               sockets to connect to (unix:PATH)
//	tcp                "host:port" to connect to (tcp)
//	as_other           {"agent_id", "credential"}: tool.call through its
//	                   own socket for another agent (as_agent_id,
//	                   as_credential), and a method other than tool.call
//	                   (method)
//	sleeper            a tag: start "sleep TAG" after setsid and a double
//	                   fork (sleeper)
//	own                its own tool.call through its socket (own_tool),
//	                   writes in its cwd, /tmp and HOME (own_write:...),
//	                   a git commit in its cwd (own_commit)
//	spawn              a name: spawn_agent a child by that name (spawn)
//	cred               the answer is this process's credential (for the
//	                   unsandboxed agent whose credential the probe tries)
//	gitdir             {"marker"} or {"outside"}: point the worktree's
//	                   repository elsewhere, through the commondir of the
//	                   repository's directory for the worktree
//	                   (gitdir_commondir), then through the worktree's .git
//	                   file (gitdir_file), at a git directory made in the
//	                   worktree: with MARKER, a working copy of the real
//	                   repository (its objects, its HEAD) whose config runs
//	                   "touch MARKER" whenever git reads a file (a clean
//	                   filter every file gets from .gitattributes), and a
//	                   new file; with OUTSIDE, one whose commondir names
//	                   OUTSIDE. Also plant a per-worktree config
//	                   (gitdir_config_worktree) and alternates to another
//	                   repository's objects (gitdir_alternates) in the real
//	                   repository.
//	exit               after answering, the program exits (the next turn
//	                   starts it again, in a new sandbox)
const probeScript = `import glob, json, os, socket, subprocess, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from warren_script import read_turn, call_tool_socket, done

def attempt(f):
    try:
        f()
        return "ok"
    except BaseException as e:
        return "denied: %s" % (e,)

def raw(params, method="tool.call"):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(os.environ["WARREN_SOCKET"])
    s.sendall(json.dumps({"id": 1, "method": method, "params": params}).encode() + b"\n")
    s.shutdown(socket.SHUT_WR)
    buf = b""
    while not buf.endswith(b"\n"):
        c = s.recv(65536)
        if not c:
            break
        buf += c
    s.close()
    resp = json.loads(buf)
    if resp.get("error"):
        raise RuntimeError(resp["error"].get("message"))
    res = resp.get("result") or {}
    if isinstance(res, dict) and res.get("error"):
        raise RuntimeError(res["error"])

def read(p):
    with open(p) as f:
        f.read()

def write(p):
    with open(os.path.expandvars(p), "w") as f:
        f.write("escaped\n")

def unix(p):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(p)
    s.close()

def tcp(addr):
    host, port = addr.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=5)
    s.close()

def commondir():
    with open(".git") as f:
        admin = f.read().split("gitdir: ", 1)[1].strip()
    with open(os.path.join(admin, "commondir"), "w") as f:
        f.write("/tmp\n")

def real_dirs():
    with open(".git") as f:
        admin = f.read().split("gitdir: ", 1)[1].strip()
    with open(os.path.join(admin, "commondir")) as f:
        common = os.path.join(admin, f.read().strip())
    return admin, common

def plant(path, text):
    with open(path, "w") as f:
        f.write(text)

def evil_gitdir(g, common):
    head = subprocess.run(["git", "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    ev = os.path.abspath(".evil")
    subprocess.run(["git", "init", "-q", "--bare", ev], check=True, capture_output=True)
    if g.get("marker"):
        with open(os.path.join(ev, "config"), "a") as f:
            f.write('[core]\n\tbare = false\n[filter "x"]\n\tclean = "touch %s; cat"\n' % g["marker"])
        plant(os.path.join(ev, "objects", "info", "alternates"), os.path.join(common, "objects") + "\n")
        plant(os.path.join(ev, "HEAD"), head + "\n")
        plant(".gitattributes", "* filter=x\n")
        plant("trap.txt", "a new file for the filter\n")
    else:
        plant(os.path.join(ev, "commondir"), g["outside"] + "\n")
    plant(".git", "gitdir: %s\n" % ev)

def commit():
    with open("committed.txt", "w") as f:
        f.write("from inside\n")
    git = ["git", "-c", "user.name=agent", "-c", "user.email=agent@example.com"]
    for args in (["add", "committed.txt"], ["commit", "-q", "-m", "inside"]):
        p = subprocess.run(git + args, capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError("git %s: %s" % (args[0], p.stderr.strip()))

while True:
    msg = read_turn()
    if msg == "cred":
        done(os.environ.get("WARREN_AGENT_CREDENTIAL", ""))
        continue
    if not msg.startswith("probe "):
        done("not a probe")  # a spawned child's first turn
        continue
    spec = json.loads(msg[len("probe "):])
    out = {}
    for p in spec.get("read", []):
        out["read:" + p] = attempt(lambda: read(p))
    for p in spec.get("write", []):
        out["write:" + p] = attempt(lambda: write(p))
    if spec.get("glob"):
        out["glob"] = "%d matches" % len(glob.glob(spec["glob"]))
    for p in spec.get("unix", []):
        out["unix:" + p] = attempt(lambda: unix(p))
    if spec.get("tcp"):
        out["tcp"] = attempt(lambda: tcp(spec["tcp"]))
    other = spec.get("as_other")
    if other:
        args = {"tool": "send_message", "arguments": {"recipient": "USER", "text": "escaped as another agent"}}
        out["as_agent_id"] = attempt(lambda: raw(dict(args, agent_id=other["agent_id"])))
        out["as_credential"] = attempt(lambda: raw(dict(args, credential=other["credential"])))
        out["method"] = attempt(lambda: raw({}, method="agent.list"))
    if spec.get("sleeper"):
        out["sleeper"] = attempt(lambda: subprocess.run(["setsid", "sh", "-c", "sleep %s &" % spec["sleeper"]], check=True))
    if spec.get("gitdir"):
        g = spec["gitdir"]
        admin, common = real_dirs()
        out["gitdir_config_worktree"] = attempt(lambda: plant(os.path.join(admin, "config.worktree"),
            '[filter "x"]\n\tclean = "touch %s; cat"\n' % g["marker"]))
        out["gitdir_alternates"] = attempt(lambda: plant(os.path.join(common, "objects", "info", "alternates"), "/tmp\n"))
        out["gitdir_commondir"] = attempt(commondir)
        out["gitdir_file"] = attempt(lambda: evil_gitdir(g, common))
    if spec.get("spawn"):
        out["spawn"] = attempt(lambda: call_tool_socket("spawn_agent", name=spec["spawn"], instructions="a child"))
    if spec.get("own"):
        out["own_tool"] = attempt(lambda: call_tool_socket("send_message", recipient="USER", text="sent from inside"))
        for p in ["own.txt", "/tmp/own.txt", os.path.join(os.environ["HOME"], "own.txt")]:
            out["own_write:" + p] = attempt(lambda: write(p))
        out["own_commit"] = attempt(commit)
    done(json.dumps(out))
    if spec.get("exit"):
        sys.exit(0)
`

// sandboxFixture is a daemon whose agents run probeScript, each with a
// workspace of one repository.
type sandboxFixture struct {
	d            *testDaemon
	script, repo string
}

// newSandboxFixture starts the daemon; scripted, when not nil, is the
// config's "scripted" entry.
func newSandboxFixture(t *testing.T, scripted map[string]any) *sandboxFixture {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Fatal("bwrap is not installed (Debian package bubblewrap): the sandbox tests need it; .ci/run installs it")
	}
	d := newTestDaemon(t, modeBinary)
	if scripted != nil {
		writeFile(t, filepath.Join(d.Home, "config.json"), mustJSON(t, map[string]any{"providers": map[string]any{"scripted": scripted}}))
	}
	d.Start()
	writeScripts(t, d.dir)
	f := &sandboxFixture{d: d, script: filepath.Join(d.dir, "probe"), repo: gitRepo(t, d.dir)}
	writeFile(t, f.script, "#!"+procPython+"\n"+probeScript)
	if err := os.Chmod(f.script, 0o700); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *sandboxFixture) create(name string, sandboxed bool) string {
	p := map[string]any{"name": name, "provider": "scripted", "model": f.script, "workspace": map[string]any{"repo": f.repo}}
	if sandboxed {
		p["sandbox"] = true
	}
	return f.d.callN("agent.create", p)["agent_id"].(string)
}

// probe sends agent id a probe and returns what it could do.
func (f *sandboxFixture) probe(t *testing.T, id string, spec map[string]any) map[string]string {
	t.Helper()
	return probeAgent(t, f.d, id, spec)
}

// probeAgent sends agent id, which runs probeScript on d, a probe and
// returns what it could do.
func probeAgent(t *testing.T, d *testDaemon, id string, spec map[string]any) map[string]string {
	t.Helper()
	res := d.callN("agent.send", map[string]any{"agent_id": id, "message": "probe " + mustJSON(t, spec)})
	resp, _ := res["response"].(string)
	out := map[string]string{}
	if err := json.Unmarshal([]byte(resp), &out); err != nil {
		t.Fatalf("the probe answered %v: %v", res, err)
	}
	return out
}

func (f *sandboxFixture) ws(id string) string { return filepath.Join(f.d.Home, "workspaces", id) }

// TestSandboxEscapes is issue 34's proof: a sandboxed agent's program
// tries every way out the threat model names, and each one fails; what
// it is meant to do (its own tool call through its own socket, writes in
// its workspace, /tmp and its home, a commit on its branch) works. The
// same probe run by an unsandboxed agent gets out, so each check can
// fail.
func TestSandboxEscapes(t *testing.T) {
	t.Parallel()
	f := newSandboxFixture(t, nil)
	boxed, plain := f.create("boxed", true), f.create("plain", false)
	outside := filepath.Join(f.d.dir, "outside")
	if err := os.Mkdir(outside, 0o700); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(outside, "secret.txt")
	writeFile(t, secret, "the operator's secret\n")
	cred := f.d.callN("agent.send", map[string]any{"agent_id": plain, "message": "cred"})["response"].(string)
	if cred == "" {
		t.Fatal("the unsandboxed agent has no credential")
	}
	spec := map[string]any{
		"read": []string{secret, filepath.Join(f.ws(plain), "notes.md"),
			filepath.Join(f.d.Home, "agents", plain, "events.jsonl"), filepath.Join(f.d.Home, "agents", boxed, "events.jsonl")},
		"write": []string{filepath.Join(outside, "planted.txt"), "/etc/warren-escape", "/usr/warren-escape",
			filepath.Join(f.repo, ".git", "hooks", "post-commit")},
		"glob":     filepath.Join(f.d.Home, "agents", "*", "events.jsonl"),
		"unix":     []string{filepath.Join(f.d.Home, "daemon.sock")},
		"as_other": map[string]any{"agent_id": plain, "credential": cred},
		"own":      true,
	}
	got := f.probe(t, boxed, spec)
	t.Logf("inside: %v", got)
	for k, v := range got {
		want := "denied"
		switch {
		case strings.HasPrefix(k, "own_"):
			want = "ok"
		case k == "glob":
			want = "0 matches"
		}
		if !strings.HasPrefix(v, want) {
			t.Errorf("sandboxed %s: %s, want %s", k, v, want)
		}
	}
	if len(got) != 4+4+1+1+3+1+3+1 {
		t.Errorf("the probe answered %d checks, want 18: %v", len(got), got)
	}
	if _, err := os.Stat(filepath.Join(outside, "planted.txt")); !os.IsNotExist(err) {
		t.Error("the sandboxed agent planted a file outside its workspace")
	}
	if runGit(t, f.repo, "show", "warren/boxed-"+boxed[:8]+":committed.txt") != "from inside" {
		t.Error("the commit made inside is not on the agent's branch")
	}
	if !strings.Contains(readLog(t, f.d, boxed), "sent from inside") {
		t.Error("its own tool call through its socket is not in its log")
	}
	if strings.Contains(readLog(t, f.d, plain), "escaped as another agent") {
		t.Error("a tool call for another agent landed in that agent's log")
	}
	if b, err := os.ReadFile(filepath.Join(f.ws(boxed), "own.txt")); err != nil || string(b) != "escaped\n" {
		t.Errorf("own.txt in the workspace: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(f.d.Home, "agents", boxed, "home", "own.txt")); err != nil {
		t.Errorf("the private home does not hold what the agent wrote to HOME: %v", err)
	}

	// The same probe without a sandbox: the reads, the glob and the
	// daemon socket get through (the threat model the sandbox closes).
	open := f.probe(t, plain, map[string]any{"read": spec["read"], "glob": spec["glob"], "unix": spec["unix"]})
	for _, k := range []string{"read:" + secret, "unix:" + filepath.Join(f.d.Home, "daemon.sock")} {
		if open[k] != "ok" {
			t.Errorf("unsandboxed %s: %s, want ok (the check must be able to fail)", k, open[k])
		}
	}
	if open["glob"] == "0 matches" {
		t.Error("unsandboxed glob found no logs (the check must be able to fail)")
	}
}

// TestSandboxedAgentCannotRedirectTheDaemonsGit: the daemon snapshots a
// sandboxed agent's worktree with git, outside the sandbox, and builds
// each new sandbox of the agent around its repository. The agent cannot
// rewrite which repository the worktree belongs to (commondir), give the
// worktree a config of its own (config.worktree) or the repository
// another's objects (alternates): each is read-only inside. What it can
// rewrite, its worktree's .git file, is never followed. Pointed at a
// working copy of the repository whose config runs a command on every
// file git reads (a clean filter), the command never runs for the daemon
// and the turn's end snapshot is the real repository's; pointed at a git
// directory whose commondir names a directory of the operator's, the
// agent's next sandbox (its program exits and starts again) does not bind
// that directory.
func TestSandboxedAgentCannotRedirectTheDaemonsGit(t *testing.T) {
	t.Parallel()
	f := newSandboxFixture(t, nil)
	create := func(name string) string {
		// History as context: a program started again does not re-run the
		// probe that made it exit.
		return f.d.callN("agent.create", map[string]any{"name": name, "provider": "scripted", "model": f.script,
			"workspace": map[string]any{"repo": f.repo}, "sandbox": true, "metadata": map[string]any{"history": "context"}})["agent_id"].(string)
	}
	planted := func(got map[string]string) {
		t.Helper()
		for _, k := range []string{"gitdir_commondir", "gitdir_config_worktree", "gitdir_alternates"} {
			if !strings.HasPrefix(got[k], "denied") {
				t.Errorf("%s from inside: %s, want denied", k, got[k])
			}
		}
		if got["gitdir_file"] != "ok" {
			t.Fatalf("the agent could not set its trap in its own worktree (the checks would prove nothing): %s", got["gitdir_file"])
		}
	}

	// The filter: the turn's end snapshot runs after the probe answered
	// and before the send returns.
	trapper := create("trapper")
	marker := filepath.Join(f.d.dir, "filter-ran")
	planted(f.probe(t, trapper, map[string]any{"gitdir": map[string]any{"marker": marker}}))
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatal("the daemon's git ran a command configured by a git directory the sandboxed agent made")
	}
	var end string
	for _, d := range eventsNamed(t, f.d, trapper, "workspace.snapshot") {
		if d["at"] == "end" {
			end, _ = d["commit"].(string)
		}
	}
	if end == "" {
		t.Fatal("the turn's end snapshot was not logged")
	}
	if runGit(t, f.repo, "rev-parse", "refs/warren/snapshots/"+trapper) != end {
		t.Errorf("the end snapshot %s is not the real repository's snapshot ref", end)
	}
	if got := runGit(t, f.repo, "show", end+":trap.txt"); got != "a new file for the filter" {
		t.Errorf("the end snapshot holds trap.txt as %q", got)
	}

	// The binds: the program starts again in a new sandbox, built while
	// the .git file names the agent's directory, whose commondir names
	// outside.
	binder := create("binder")
	outside := filepath.Join(f.d.dir, "outside")
	if err := os.Mkdir(outside, 0o700); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(outside, "secret.txt")
	writeFile(t, secret, "the operator's secret\n")
	planted(f.probe(t, binder, map[string]any{"gitdir": map[string]any{"outside": outside}, "exit": true}))
	if got := f.probe(t, binder, map[string]any{"read": []string{secret}}); !strings.HasPrefix(got["read:"+secret], "denied") {
		t.Errorf("after redirecting its .git, the agent reads %s: %s, want denied", secret, got["read:"+secret])
	}
}

// TestSandboxedAgentInALinkedWorktreeIsWarned: a sandboxed agent whose
// cwd is a linked git worktree that is no warren workspace (its git
// directory is outside the cwd, and the sandbox binds only what the log
// names), or in a directory of one, is created, and the daemon says why
// git will not work inside and what to do; an agent in a plain directory
// gets no such warning.
func TestSandboxedAgentInALinkedWorktreeIsWarned(t *testing.T) {
	t.Parallel()
	f := newSandboxFixture(t, nil)
	linked := filepath.Join(f.d.dir, "linked")
	runGit(t, f.repo, "worktree", "add", "-q", "-b", "side", linked)
	plain := filepath.Join(f.d.dir, "plain")
	if err := os.Mkdir(plain, 0o700); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(linked, "sub")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, cwd := range []string{plain, linked, sub} {
		f.d.callN("agent.create", map[string]any{"name": filepath.Base(cwd), "provider": "scripted", "model": f.script, "cwd": cwd, "sandbox": true})
	}
	// Stopped, the daemon's output is all there.
	if err := f.d.Stop(); err != nil {
		t.Fatal(err)
	}
	warnings := grepLines(f.d.Output(), "in a linked git worktree that is not a warren workspace")
	lines := strings.Split(warnings, "\n")
	if len(lines) != 2 || !strings.HasSuffix(lines[0], "cwd="+linked) || !strings.HasSuffix(lines[1], "cwd="+sub) {
		t.Fatalf("the daemon warned:\n%s\nwant one warning for the agent in %s and one for the agent in %s", warnings, linked, sub)
	}
}

// TestSandboxChildAndBetweenTurns: a child a sandboxed agent spawns is
// sandboxed too (logged in its agent.created), and the agent's socket
// serves no tool call between its turns (code 2), as the main socket
// does for a credential.
func TestSandboxChildAndBetweenTurns(t *testing.T) {
	t.Parallel()
	f := newSandboxFixture(t, nil)
	boxed := f.create("boxed", true)
	created := watchCreated(t, f.d, "kid")
	if got := f.probe(t, boxed, map[string]any{"spawn": "kid"}); got["spawn"] != "ok" {
		t.Fatalf("spawn_agent from inside: %v", got)
	}
	select {
	case data := <-created:
		if sb, _ := data["sandbox"].(map[string]any); sb["type"] != "bwrap" || sb["network"] != true {
			t.Errorf("the child's agent.created: %v, want a sandbox with the network", data)
		}
	case <-time.After(time.Minute):
		t.Fatal("the child was never created")
	}
	sock := filepath.Join(f.d.Home, "agents", boxed, "agent.sock")
	_, err := protocol.CallJSON(procCtx(t), sock, "tool.call", map[string]any{"tool": "send_message",
		"arguments": map[string]any{"recipient": "USER", "text": "between turns"}})
	wantCode(t, "a tool call through the agent socket between turns", err, protocol.CodeInvalid)
}

// TestSandboxNetworkOff: an entry with "network": false unshares the
// network: a connect to a listener on the host's loopback fails inside,
// and succeeds from a sandboxed agent that keeps the network.
func TestSandboxNetworkOff(t *testing.T) {
	t.Parallel()
	f := newSandboxFixture(t, nil)
	boxed := f.create("boxed", true)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if got := f.probe(t, boxed, map[string]any{"tcp": ln.Addr().String()}); got["tcp"] != "ok" {
		t.Errorf("network true: the connect to %s: %s", ln.Addr(), got["tcp"])
	}
	// A daemon whose scripted entry asks for a sandbox without the
	// network: an agent created without --sandbox gets it.
	g := newSandboxFixture(t, map[string]any{"sandbox": map[string]any{"type": "bwrap", "network": false}})
	off := g.create("offline", false)
	if got := g.probe(t, off, map[string]any{"tcp": ln.Addr().String()}); !strings.HasPrefix(got["tcp"], "denied") {
		t.Errorf("network false: the connect to %s: %s", ln.Addr(), got["tcp"])
	}
	if log := readLog(t, g.d, off); !strings.Contains(log, `"sandbox":{"type":"bwrap","network":false}`) {
		t.Errorf("agent.created does not record the entry's sandbox:\n%s", log)
	}
}

// TestSandboxLeavesNothingBehind: a sleeper the agent starts after setsid
// and a double fork (out of its process group) is gone once the agent's
// process ends, and once the daemon is killed with SIGKILL.
func TestSandboxLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	f := newSandboxFixture(t, nil)
	boxed, plain := f.create("boxed", true), f.create("plain", false)
	tag := func() string { return fmt.Sprintf("%d.%d", 86400+os.Getpid()%1000, time.Now().UnixNano()%1000000) }

	first := tag()
	if got := f.probe(t, boxed, map[string]any{"sleeper": first}); got["sleeper"] != "ok" {
		t.Fatalf("starting the sleeper: %v", got)
	}
	if len(sleepers(first)) != 1 {
		t.Fatalf("the sleeper %s is not running", first)
	}
	runCLI(t, f.d.Home, "agent", "terminate", "boxed").want(t, 0, "terminate boxed")
	waitNoSleeper(t, first, "after the agent's process ended")

	second := tag()
	other := f.create("boxed2", true)
	if got := f.probe(t, other, map[string]any{"sleeper": second}); got["sleeper"] != "ok" {
		t.Fatalf("starting the sleeper: %v", got)
	}
	if len(sleepers(second)) != 1 {
		t.Fatalf("the sleeper %s is not running", second)
	}
	f.d.Kill()
	waitNoSleeper(t, second, "after a kill -9 of the daemon")

	// Control: without a sandbox, the same sleeper outlives the agent.
	f.d.Start()
	third := tag()
	if got := f.probe(t, plain, map[string]any{"sleeper": third}); got["sleeper"] != "ok" {
		t.Fatalf("starting the sleeper: %v", got)
	}
	runCLI(t, f.d.Home, "agent", "terminate", "plain").want(t, 0, "terminate plain")
	pids := sleepers(third)
	if len(pids) != 1 {
		t.Fatalf("unsandboxed, the sleeper did not outlive its agent (%v): the check must be able to fail", pids)
	}
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
}

// sleepers are the pids of the host's "sleep TAG" processes.
func sleepers(tag string) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && string(b) == "sleep\x00"+tag+"\x00" {
			out = append(out, pid)
		}
	}
	return out
}

func waitNoSleeper(t *testing.T, tag, when string) {
	t.Helper()
	deadline := time.Now().Add(procBound)
	for len(sleepers(tag)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the sleeper %s is still running %s", tag, when)
		}
		time.Sleep(10 * time.Millisecond) // /proc has no change notification
	}
}

// TestSandboxNeedsBwrap: without bwrap on the daemon's PATH a sandboxed
// create is refused, naming the package to install, and creates nothing;
// an agent created sandboxed earlier is blocked at the next start (it
// never runs unconfined) with a status that says why, and runs again
// once bwrap is back.
func TestSandboxNeedsBwrap(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, modeBinary)
	d.shell = "PATH=/nonexistent; export PATH"
	d.Start()
	writeScripts(t, d.dir)
	script := filepath.Join(d.dir, "probe")
	writeFile(t, script, "#!"+procPython+"\n"+probeScript)
	if err := os.Chmod(script, 0o700); err != nil {
		t.Fatal(err)
	}
	create := map[string]any{"name": "boxed", "provider": "scripted", "model": script, "sandbox": true}
	_, err := d.Client().Call(procCtx(t), "agent.create", create)
	wantCode(t, "a sandboxed create without bwrap", err, protocol.CodeInvalid)
	if !strings.Contains(err.Error(), "apt-get install bubblewrap") {
		t.Errorf("the refusal does not say what to install: %v", err)
	}
	if agents := d.callN("agent.list", nil)["agents"].([]any); len(agents) != 0 {
		t.Fatalf("the refused create left agents: %v", agents)
	}

	if err := d.Stop(); err != nil {
		t.Fatal(err)
	}
	d.shell = ""
	d.Start()
	id := d.callN("agent.create", create)["agent_id"].(string)
	if err := d.Stop(); err != nil {
		t.Fatal(err)
	}
	d.shell = "PATH=/nonexistent; export PATH"
	d.Start()
	status := ""
	for _, a := range d.callN("agent.list", nil)["agents"].([]any) {
		if m := a.(map[string]any); m["agent_id"] == id {
			status, _ = m["degraded"].(string)
		}
	}
	if !strings.Contains(status, "sandbox cannot be made") || !strings.Contains(status, "bubblewrap") || !strings.Contains(status, "restart the daemon") {
		t.Errorf("the blocked agent is degraded with %q, want why and what to do", status)
	}
	_, err = d.Client().Call(procCtx(t), "agent.send", map[string]any{"agent_id": id, "message": "cred"})
	if err == nil || !strings.Contains(err.Error(), "cannot run") {
		t.Fatalf("a send to the blocked agent: %v", err)
	}

	if err := d.Stop(); err != nil {
		t.Fatal(err)
	}
	d.shell = ""
	d.Start()
	if got := d.callN("agent.send", map[string]any{"agent_id": id, "message": "cred"}); got["response"] == "" {
		t.Fatalf("with bwrap back the agent does not run: %v", got)
	}
}

// watchCreated subscribes to every agent's events and sends the data of
// the agent.created of the agent named name once it is logged.
func watchCreated(t *testing.T, d *testDaemon, name string) <-chan map[string]any {
	t.Helper()
	ready, out := make(chan struct{}), make(chan map[string]any, 1)
	cl, err := protocol.Dial(procCtx(t), d.Sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	errDone := errors.New("done")
	go func() {
		_ = cl.Stream(procCtx(t), "events.subscribe", map[string]any{"ready": true}, func(f protocol.Frame) error {
			data, _ := f.Event["data"].(map[string]any)
			switch {
			case f.Event["event"] == "subscribed":
				close(ready)
			case f.Event["event"] == "agent.created" && data["name"] == name:
				out <- data
				return errDone
			}
			return nil
		})
	}()
	select {
	case <-ready:
	case <-time.After(time.Minute):
		t.Fatal("events.subscribe never became ready")
	}
	return out
}
