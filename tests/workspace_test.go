package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// coderScript appends a line to notes.md in its working directory (its
// workspace), then waits on the FIFO the message names, then answers.
const coderScript = `import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from warren_script import read_turn, done
while True:
    msg = read_turn()
    with open("notes.md", "a") as f:
        f.write("a line from the agent\n")
    with open(msg.split()[-1]) as f:
        f.read()
    done("appended")
`

// gitRepo makes a repository under dir with notes.md committed.
func gitRepo(t testing.TB, dir string) string {
	t.Helper()
	repo := filepath.Join(dir, "repo")
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	runGit(t, repo, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(repo, "notes.md"), []byte("# notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runGit(t, repo, "add", "notes.md")
	runGit(t, repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "notes")
	return repo
}

func runGit(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestWorkspaceReRunEditsOnce is issue 33's headline: a scripted agent
// with a workspace appends a line to a tracked file, then blocks; kill
// -9; the start re-runs the run by itself, restoring the workspace to the
// run's start first, and the file holds the line exactly once. Then the
// agent is terminated: its work is committed to its branch, the
// directory removed, the branch kept.
func TestWorkspaceReRunEditsOnce(t *testing.T) {
	t.Parallel()
	d := startTestDaemon(t, modeBinary)
	writeScripts(t, d.dir) // the helper library beside the script
	script := filepath.Join(d.dir, "coder")
	if err := os.WriteFile(script, []byte("#!"+procPython+"\n"+coderScript), 0o700); err != nil {
		t.Fatal(err)
	}
	repo := gitRepo(t, d.dir)
	res := d.callN("agent.create", map[string]any{"name": "coder", "provider": "scripted", "model": script,
		"workspace": map[string]any{"repo": repo}})
	id := res["agent_id"].(string)
	ws := filepath.Join(d.Home, "workspaces", id)
	if got := runGit(t, ws, "symbolic-ref", "--short", "HEAD"); got != "warren/coder-"+id[:8] {
		t.Fatalf("the workspace is on %s", got)
	}
	fifo := filepath.Join(d.dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	go func() {
		_, _ = d.Client().Call(procCtx(t), "agent.send", map[string]any{"agent_id": id, "message": "append " + fifo})
	}()
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0) // the script appended and waits
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(ws, "notes.md")); strings.Count(got, "a line from the agent") != 1 {
		t.Fatalf("notes.md mid-turn: %q", got)
	}
	d.Kill()
	w.Close()
	d.Start()
	// The re-run restored the start snapshot, appended again and waits.
	w, err = os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write([]byte("go on"))
	w.Close()
	waitEvent(t, d, id, "turn.complete", func(ev string, _ map[string]any) bool { return ev == "turn.complete" })
	if got := readFile(t, filepath.Join(ws, "notes.md")); got != "# notes\na line from the agent\n" {
		t.Fatalf("notes.md after the re-run: %q, want the line exactly once", got)
	}
	log := readLog(t, d, id)
	for _, want := range []string{`"event":"workspace.created"`, `"at":"start"`, `"at":"end"`, `"reason":"rerun"`, `"by":"auto"`} {
		if !strings.Contains(log, want) {
			t.Fatalf("the log lacks %s:\n%s", want, log)
		}
	}

	runCLI(t, d.Home, "agent", "terminate", "coder").want(t, 0, "terminate coder")
	if _, err := os.Stat(ws); !os.IsNotExist(err) {
		t.Fatal("the workspace directory is still there after the termination")
	}
	branch := "warren/coder-" + id[:8]
	if got := runGit(t, repo, "show", branch+":notes.md"); got != "# notes\na line from the agent" {
		t.Fatalf("the branch holds notes.md = %q", got)
	}
	if !strings.Contains(readLog(t, d, id), `"event":"workspace.closed"`) {
		t.Fatal("no workspace.closed")
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// leadScript: "team" writes lead.txt in the lead's workspace and spawns
// w1 and w2 in one turn; a spawned child writes <its id>.txt in its own
// workspace.
const leadScript = `import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from warren_script import read_turn, call_tool, done
while True:
    msg = read_turn()
    if msg.startswith("team"):
        with open("lead.txt", "w") as f:
            f.write("the lead's plan\n")
        call_tool("spawn_agent", name="w1", instructions="work")
        call_tool("spawn_agent", name="w2", instructions="work")
        done("spawned")
    else:
        with open(os.environ["WARREN_AGENT_ID"] + ".txt", "w") as f:
            f.write("mine\n")
        done("worked")
`

// TestParallelSpawnsBranchFromTheParentsSnapshot: children spawned in one
// turn each get a worktree on a branch of their own, from the parent's
// snapshot at the end of that turn (so they have the file the turn
// wrote), never from each other's work; the parent merges both.
func TestParallelSpawnsBranchFromTheParentsSnapshot(t *testing.T) {
	t.Parallel()
	d := startTestDaemon(t, modeBinary)
	writeScripts(t, d.dir)
	script := filepath.Join(d.dir, "lead")
	if err := os.WriteFile(script, []byte("#!"+procPython+"\n"+leadScript), 0o700); err != nil {
		t.Fatal(err)
	}
	repo := gitRepo(t, d.dir)
	lead := d.createAgent("lead", "scripted", script, "")
	_ = lead
	res := d.callN("agent.create", map[string]any{"name": "boss", "provider": "scripted", "model": script,
		"workspace": map[string]any{"repo": repo}})
	boss := res["agent_id"].(string)
	if r := d.callN("agent.send", map[string]any{"agent_id": boss, "message": "team"}); r["response"] != "spawned" {
		t.Fatalf("send: %v", r)
	}
	var kids []string
	for _, name := range []string{"boss/w1", "boss/w2"} {
		ins := d.callN("agent.inspect", map[string]any{"agent_id": name})
		kids = append(kids, ins["agent_id"].(string))
	}
	for i, kid := range kids {
		waitEvent(t, d, kid, "the bootstrap turn", func(ev string, _ map[string]any) bool { return ev == "turn.complete" })
		ws := filepath.Join(d.Home, "workspaces", kid)
		if got := readFile(t, filepath.Join(ws, "lead.txt")); got != "the lead's plan\n" {
			t.Fatalf("child %d lacks the parent's file from the turn that spawned it: %q", i+1, got)
		}
		other := kids[1-i]
		if _, err := os.Stat(filepath.Join(ws, other+".txt")); !os.IsNotExist(err) {
			t.Fatalf("child %d's worktree has its sibling's work", i+1)
		}
		if got := runGit(t, ws, "symbolic-ref", "--short", "HEAD"); got != "warren/boss-w"+string(rune('1'+i))+"-"+kid[:8] {
			t.Fatalf("child %d is on %s", i+1, got)
		}
	}
	bossWS := filepath.Join(d.Home, "workspaces", boss)
	for _, name := range []string{"boss/w1", "boss/w2"} {
		runCLI(t, d.Home, "workspace", "merge", name).want(t, 0, "workspace merge "+name)
	}
	for _, kid := range kids {
		if got := readFile(t, filepath.Join(bossWS, kid+".txt")); got != "mine\n" {
			t.Fatalf("after the merges the lead's worktree lacks %s.txt", kid)
		}
	}
	if n := strings.Count(readLog(t, d, boss), `"event":"workspace.merged"`); n != 2 {
		t.Fatalf("%d workspace.merged in the lead's log, want 2", n)
	}
}

// TestWorkspaceRepairedAtStart: a worktree directory deleted while the
// daemon was down, and a branch renamed inside one, are repaired at the
// next start (workspace.repaired) from the branch, committed and
// uncommitted work kept.
func TestWorkspaceRepairedAtStart(t *testing.T) {
	t.Parallel()
	d := startTestDaemon(t, modeBinary)
	writeScripts(t, d.dir)
	repo := gitRepo(t, d.dir)
	mk := func(name string) (string, string) {
		res := d.callN("agent.create", map[string]any{"name": name, "provider": "inproc", "model": "echo",
			"workspace": map[string]any{"repo": repo}})
		id := res["agent_id"].(string)
		return id, filepath.Join(d.Home, "workspaces", id)
	}
	gone, goneWS := mk("gone")
	renamed, renamedWS := mk("renamed")
	// committed work in one, uncommitted in the other
	if err := os.WriteFile(filepath.Join(goneWS, "done.txt"), []byte("committed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runGit(t, goneWS, "add", "done.txt")
	runGit(t, goneWS, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "done")
	if err := os.WriteFile(filepath.Join(renamedWS, "wip.txt"), []byte("uncommitted\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := d.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(goneWS); err != nil {
		t.Fatal(err)
	}
	runGit(t, renamedWS, "branch", "-m", "my-own-name")
	d.Start()
	if got := readFile(t, filepath.Join(goneWS, "done.txt")); got != "committed\n" {
		t.Fatalf("the deleted worktree was not made again from its branch: %q", got)
	}
	if got := runGit(t, renamedWS, "symbolic-ref", "--short", "HEAD"); got != "warren/renamed-"+renamed[:8] {
		t.Fatalf("the renamed branch is %s", got)
	}
	if got := readFile(t, filepath.Join(renamedWS, "wip.txt")); got != "uncommitted\n" {
		t.Fatal("the uncommitted work was lost")
	}
	for _, id := range []string{gone, renamed} {
		if !strings.Contains(readLog(t, d, id), `"event":"workspace.repaired"`) {
			t.Fatalf("no workspace.repaired in the log of %s", id)
		}
		if r := d.callN("agent.send", map[string]any{"agent_id": id, "message": "still there?"}); !strings.Contains(str(r["response"]), "still there?") {
			t.Fatalf("a turn after the repair: %v", r)
		}
	}
}

// TestSquashMergedWorkspaceClosesWithNothingLost: the peers' pitfall 4
// and a terminate with uncommitted work. The agent commits on its branch;
// the user squash-merges the branch into main (its commits unreachable
// from main, the case where other tools call a worktree "not clean" or
// delete the branch); the agent then leaves a changed, a new and a
// deleted file uncommitted. Terminating it commits all of that to its
// branch, removes the directory, keeps the branch (the agent's commit in
// its history) and leaves the main checkout as the user left it.
func TestSquashMergedWorkspaceClosesWithNothingLost(t *testing.T) {
	t.Parallel()
	d := startTestDaemon(t, modeBinary)
	repo := gitRepo(t, d.dir)
	res := d.callN("agent.create", map[string]any{"name": "sq", "provider": "inproc", "model": "echo",
		"workspace": map[string]any{"repo": repo}})
	id := res["agent_id"].(string)
	ws, branch := filepath.Join(d.Home, "workspaces", id), "warren/sq-"+id[:8]
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(ws, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("feature.txt", "v1\n")
	runGit(t, ws, "add", "feature.txt")
	runGit(t, ws, "-c", "user.name=agent", "-c", "user.email=a@a", "commit", "-q", "-m", "the agent's feature")
	agentCommit := runGit(t, ws, "rev-parse", "HEAD")

	runGit(t, repo, "merge", "--squash", branch)
	runGit(t, repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "squashed feature")
	mainHead := runGit(t, repo, "rev-parse", "HEAD")

	write("feature.txt", "v2\n")
	write("late.txt", "uncommitted\n")
	if err := os.Remove(filepath.Join(ws, "notes.md")); err != nil {
		t.Fatal(err)
	}
	runCLI(t, d.Home, "agent", "terminate", "sq").want(t, 0, "terminate sq")

	if _, err := os.Stat(ws); !os.IsNotExist(err) {
		t.Fatalf("the workspace directory is still there: %v", err)
	}
	if got := runGit(t, repo, "show", branch+":feature.txt"); got != "v2" {
		t.Fatalf("the branch's feature.txt = %q, want the uncommitted v2", got)
	}
	if got := runGit(t, repo, "show", branch+":late.txt"); got != "uncommitted" {
		t.Fatalf("the branch's late.txt = %q", got)
	}
	if got := runGit(t, repo, "ls-tree", "--name-only", branch); strings.Contains(got, "notes.md") {
		t.Fatalf("the deletion was not committed: the branch holds %q", got)
	}
	cmd := exec.Command("git", "merge-base", "--is-ancestor", agentCommit, branch)
	cmd.Dir = repo
	if err := cmd.Run(); err != nil {
		t.Fatalf("the agent's own commit is not in its branch's history any more: %v", err)
	}
	if got := runGit(t, repo, "rev-parse", "HEAD"); got != mainHead {
		t.Fatalf("main moved: %s, was %s", got, mainHead)
	}
	if got := runGit(t, repo, "status", "--porcelain"); got != "" {
		t.Fatalf("the main checkout is not as the user left it: %q", got)
	}
	if got := runGit(t, repo, "worktree", "list", "--porcelain"); strings.Contains(got, ws) {
		t.Fatalf("git still lists the removed worktree:\n%s", got)
	}
	want := fmt.Sprintf(`"event":"workspace.closed","data":{"branch":%q,"commit":%q,"removed":true}`, branch, runGit(t, repo, "rev-parse", branch))
	if log := readLog(t, d, id); strings.Count(log, `"event":"workspace.closed"`) != 1 || !strings.Contains(log, want) {
		t.Fatalf("the log lacks exactly one %s:\n%s", want, log)
	}
}

// TestOperatorRestoresAndReviewsAWorkspace: `warren workspace log`
// lists an agent's snapshots, `diff` shows the workspace's change since
// its base and a turn's own, and `restore` (by a hash prefix, as the log
// prints it) puts a snapshot back: the changed file rewritten, the file
// created since removed, the ignored file left alone; workspace.restored
// (operator) is logged. A prefix that is too short or names no snapshot
// is refused, saying why.
func TestOperatorRestoresAndReviewsAWorkspace(t *testing.T) {
	t.Parallel()
	d := startTestDaemon(t, modeBinary)
	repo := gitRepo(t, d.dir)
	if err := os.WriteFile(filepath.Join(repo, ".gitignore"), []byte("*.log\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runGit(t, repo, "add", ".gitignore")
	runGit(t, repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "ignore logs")
	res := d.callN("agent.create", map[string]any{"name": "rv", "provider": "inproc", "model": "echo",
		"workspace": map[string]any{"repo": repo}})
	id := res["agent_id"].(string)
	ws := filepath.Join(d.Home, "workspaces", id)
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(ws, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d.callN("agent.send", map[string]any{"agent_id": id, "message": "one"})
	write("notes.md", "# notes\nafter turn one\n")
	write("new.txt", "new\n")
	write("build.log", "ignored\n")
	d.callN("agent.send", map[string]any{"agent_id": id, "message": "two"})

	var log struct {
		Snapshots []struct {
			Turn   int    `json:"turn"`
			At     string `json:"at"`
			Commit string `json:"commit"`
			Files  int    `json:"files_changed"`
		} `json:"snapshots"`
	}
	out := runCLI(t, d.Home, "--json", "workspace", "log", "rv").want(t, 0, "workspace log --json")
	if err := json.Unmarshal([]byte(out.stdout), &log); err != nil {
		t.Fatalf("workspace log --json: %v: %s", err, out.stdout)
	}
	if len(log.Snapshots) != 4 || log.Snapshots[1].At != "end" || log.Snapshots[2].Turn != 2 || log.Snapshots[2].Files != 2 {
		t.Fatalf("the snapshots: %+v, want turns 1 and 2 at start and end, turn 2's start with the 2 files changed between the turns", log.Snapshots)
	}
	text := runCLI(t, d.Home, "workspace", "log", "rv").want(t, 0, "workspace log").stdout
	if !strings.Contains(text, log.Snapshots[3].Commit[:11]) || !strings.Contains(text, "warren/rv-"+id[:8]) {
		t.Fatalf("workspace log prints:\n%s", text)
	}
	diff := runCLI(t, d.Home, "workspace", "diff", "rv").want(t, 0, "workspace diff").stdout
	if !strings.Contains(diff, "+after turn one") || !strings.Contains(diff, "+++ b/new.txt") || strings.Contains(diff, "build.log") {
		t.Fatalf("workspace diff (since the base):\n%s", diff)
	}
	if turn := runCLI(t, d.Home, "workspace", "diff", "rv", "--turn", "2").want(t, 0, "workspace diff --turn 2").stdout; turn != "" {
		t.Fatalf("turn 2 (echo) changed nothing, but its diff is:\n%s", turn)
	}

	for _, bad := range []string{"abc", "0000000000", "not-hex!"} {
		r := runCLI(t, d.Home, "workspace", "restore", "rv", bad)
		if r.code == 0 || !strings.Contains(r.stderr, "snapshot") {
			t.Fatalf("restore %q: exit %d, %s", bad, r.code, r.stderr)
		}
	}
	runCLI(t, d.Home, "workspace", "restore", "rv", log.Snapshots[1].Commit[:11]).want(t, 0, "workspace restore")
	if got := readFile(t, filepath.Join(ws, "notes.md")); got != "# notes\n" {
		t.Fatalf("notes.md after the restore: %q", got)
	}
	if _, err := os.Stat(filepath.Join(ws, "new.txt")); !os.IsNotExist(err) {
		t.Fatalf("new.txt, created after the snapshot, is still there: %v", err)
	}
	if got := readFile(t, filepath.Join(ws, "build.log")); got != "ignored\n" {
		t.Fatalf("the ignored file: %q", got)
	}
	want := fmt.Sprintf(`"commit":%q,"reason":"operator"`, log.Snapshots[1].Commit)
	if !strings.Contains(readLog(t, d, id), want) {
		t.Fatalf("the log lacks workspace.restored with %s", want)
	}
}

// TestAnOldGitAtStartStopsOnlyWorkspaceAgents: started with a git older
// than 2.36 on its PATH, the daemon checks the version once, keeps every
// agent with a workspace from running (its status and the refusal say
// what is wrong and what to do; its worktree is untouched) and serves the
// others.
func TestAnOldGitAtStartStopsOnlyWorkspaceAgents(t *testing.T) {
	t.Parallel()
	realGit, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	d := newTestDaemon(t, modeBinary)
	repo := gitRepo(t, d.dir)
	d.Start()
	res := d.callN("agent.create", map[string]any{"name": "ws", "provider": "inproc", "model": "echo",
		"workspace": map[string]any{"repo": repo}})
	ws := res["agent_id"].(string)
	plain := d.createAgent("plain", "inproc", "echo", "")
	if err := d.Stop(); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(d.dir, "oldbin")
	if err := os.MkdirAll(bin, 0o700); err != nil {
		t.Fatal(err)
	}
	old := "#!/bin/sh\nif [ \"$*\" != \"${*%version}\" ]; then echo 'git version 2.30.2'; exit 0; fi\nexec " + realGit + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "git"), []byte(old), 0o700); err != nil {
		t.Fatal(err)
	}
	d.shell = "export PATH=" + bin + ":$PATH"
	d.Start()
	st := agentStatus(t, d, ws)
	if why := str(st["degraded"]); !strings.Contains(why, "2.30.2") || !strings.Contains(why, "2.36") || !strings.Contains(why, "restart the daemon") {
		t.Fatalf("the workspace agent's status: %v, want it degraded naming the old git, the version needed and the restart", st)
	}
	_, err = d.Client().Call(procCtx(t), "agent.send", map[string]any{"agent_id": ws, "message": "hi"})
	if err == nil || !strings.Contains(err.Error(), "upgrade git") {
		t.Fatalf("a send to the workspace agent: %v, want a refusal saying to upgrade git", err)
	}
	if r := d.callN("agent.send", map[string]any{"agent_id": plain, "message": "hi"}); r["response"] != "echo: hi" {
		t.Fatalf("the agent without a workspace: %v", r)
	}
	if _, err := os.Stat(filepath.Join(d.Home, "workspaces", ws, "notes.md")); err != nil {
		t.Fatalf("the worktree was touched: %v", err)
	}
}

// gitWrapper stands in for git on the daemon's PATH: it counts the calls
// and, at call $KILL_AT, kills the daemon (its parent) with SIGKILL,
// before the call runs or, with KILL_MODE=after, once it has.
const gitWrapper = `#!/bin/sh
n=$(cat "$GIT_COUNTER" 2>/dev/null || echo 0)
n=$((n+1))
echo $n > "$GIT_COUNTER"
if [ "$n" = "$KILL_AT" ]; then
  if [ "$KILL_MODE" = after ]; then "$REAL_GIT" "$@"; fi
  kill -9 $PPID
  exit 1
fi
exec "$REAL_GIT" "$@"
`

// appendScript appends a line to notes.md in its workspace and answers.
const appendScript = `import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from warren_script import read_turn, done
while True:
    read_turn()
    with open("notes.md", "a") as f:
        f.write("a line from the agent\n")
    done("appended")
`

// TestKillAtEveryGitCall kills the daemon at each git call of a
// workspace's life (its creation, a turn's snapshots, the re-run's
// restore), before the call and after it, restarts it, lets the resume
// policy finish what was interrupted, and checks guarantee 11.8: the main
// checkout is untouched, a workspace that exists is on its branch, and
// the file holds the agent's line at most once, exactly once when the
// turn completed.
func TestKillAtEveryGitCall(t *testing.T) {
	t.Parallel()
	realGit, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	scenario := func(t *testing.T, killAt int, mode string) (calls int) {
		d := newTestDaemon(t, modeBinary)
		writeScripts(t, d.dir)
		script := filepath.Join(d.dir, "appender")
		if err := os.WriteFile(script, []byte("#!"+procPython+"\n"+appendScript), 0o700); err != nil {
			t.Fatal(err)
		}
		bin := filepath.Join(d.dir, "bin")
		if err := os.MkdirAll(bin, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bin, "git"), []byte(gitWrapper), 0o700); err != nil {
			t.Fatal(err)
		}
		counter := filepath.Join(d.dir, "git-calls")
		env := func(at int) string {
			return "export PATH=" + bin + ":$PATH GIT_COUNTER=" + counter + " REAL_GIT=" + realGit +
				" KILL_MODE=" + mode + " KILL_AT=" + strconv.Itoa(at)
		}
		repo := gitRepo(t, d.dir)
		head := runGit(t, repo, "rev-parse", "HEAD")
		d.shell = env(killAt)
		d.Start()
		cl := d.Client()
		res, err := cl.Call(procCtx(t), "agent.create", map[string]any{"name": "coder", "provider": "scripted", "model": script,
			"workspace": map[string]any{"repo": repo}})
		id, _ := res["agent_id"].(string)
		if err == nil {
			_, _ = cl.Call(procCtx(t), "agent.send", map[string]any{"agent_id": id, "message": "append"})
		}
		b, _ := os.ReadFile(counter)
		calls, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		d.stopQuietly()
		d.shell = env(0)
		d.Start()
		if id == "" {
			// Unacknowledged: find the agent if its creation got into the log.
			if l, err := d.Client().Call(procCtx(t), "agent.list", nil); err == nil {
				for _, a := range l["agents"].([]any) {
					id, _ = a.(map[string]any)["agent_id"].(string)
				}
			}
		}
		if runGit(t, repo, "rev-parse", "HEAD") != head || runGit(t, repo, "status", "--porcelain") != "" ||
			readFile(t, filepath.Join(repo, "notes.md")) != "# notes\n" {
			t.Fatalf("kill at git call %d (%s): the main checkout changed", killAt, mode)
		}
		if id == "" {
			return calls
		}
		log := readLog(t, d, id)
		if strings.Contains(log, `"event":"turn.start"`) {
			waitEvent(t, d, id, "the turn's completion", func(ev string, _ map[string]any) bool { return ev == "turn.complete" })
			log = readLog(t, d, id)
		}
		ws := filepath.Join(d.Home, "workspaces", id)
		if got := runGit(t, ws, "symbolic-ref", "--short", "HEAD"); got != "warren/coder-"+id[:8] {
			t.Fatalf("kill at git call %d (%s): the workspace is on %s", killAt, mode, got)
		}
		n := strings.Count(readFile(t, filepath.Join(ws, "notes.md")), "a line from the agent")
		completed := strings.Contains(log, `"event":"turn.complete"`)
		if n > 1 || (completed && n != 1) {
			t.Fatalf("kill at git call %d (%s): notes.md holds the line %d times (turn completed: %v)\n%s", killAt, mode, n, completed, log)
		}
		return calls
	}
	total := scenario(t, 0, "before")
	if total < 8 {
		t.Fatalf("the scenario made %d git calls; too few to mean anything", total)
	}
	step := 1
	if os.Getenv("WARREN_LONG") != "1" {
		step = 3 // the quick profile: every third call
	}
	tried := 0
	for k := 1; k <= total; k += step {
		for _, mode := range []string{"before", "after"} {
			t.Run(fmt.Sprintf("call%d-%s", k, mode), func(t *testing.T) { scenario(t, k, mode) })
			tried++
		}
	}
	t.Logf("%d git calls in the scenario; killed at %d points", total, tried)
}
