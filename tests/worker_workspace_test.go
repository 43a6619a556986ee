package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/warren-dev/warren/protocol"
)

// workScript works in its workspace: for a message "wait PATH" it
// writes a first line to notes.md, then waits until PATH exists, then
// writes a second; for "ask" it writes the first line, asks the operator
// (await_input, over the socket: on a worker, the worker's socket for the
// agent) and writes the answer; for any other message both lines at once.
// It answers with its working directory.
const workScript = `import os, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from warren_script import read_turn, call_tool_socket, done
while True:
    msg = read_turn()
    with open("notes.md", "a") as f:
        f.write("begun: %s\n" % msg)
    if msg.startswith("wait "):
        while not os.path.exists(msg[5:]):
            time.sleep(0.02)
    if msg == "fail":
        sys.exit(3)
    if msg.split("\n", 1)[0] == "ask":
        r = call_tool_socket("await_input", kind="approval", prompt="go on?", timeout=3600)
        with open("notes.md", "a") as f:
            f.write("answered: %s\n" % r.get("response"))
    with open("notes.md", "a") as f:
        f.write("done: %s\n" % msg)
    done(os.getcwd())
`

// awayFleet is a worker fleet whose scripted entry names an agents'
// remote (a bare clone of repo), with an agent whose workspace is a
// worktree of repo, running workScript. The entry's history mode is
// "context": a session opened again does not re-execute the program's
// past turns (which would write their lines again).
type awayFleet struct {
	*workerFleet
	repo, remote, agent string
}

func startAwayFleet(t *testing.T, workers int) *awayFleet {
	t.Helper()
	f := newAwayFleet(t, workers, true)
	f.create(t)
	return f
}

// newAwayFleet is startAwayFleet without the agent, and without the
// remote in the entry unless withRemote (its agents' workspaces then stay
// on the daemon's machine).
func newAwayFleet(t testing.TB, workers int, withRemote bool) *awayFleet {
	t.Helper()
	dir := t.TempDir()
	repo := gitRepo(t, dir)
	remote := filepath.Join(dir, "agents.git")
	runGit(t, dir, "clone", "-q", "--bare", repo, remote)
	entry := fmt.Sprintf(`"worker": {"remote": %q}`, remote)
	if !withRemote {
		entry = `"worker": {}`
	}
	f := startWorkerFleet(t, workers, 4, `{"max_retries": 5, "retry_base_delay_ms": 50,
		"providers": {"scripted": {"history": "context", `+entry+`}}}`)
	script := filepath.Join(f.d.dir, "work")
	writeFile(t, script, "#!"+procPython+"\n"+workScript)
	if err := os.Chmod(script, 0o700); err != nil {
		t.Fatal(err)
	}
	return &awayFleet{workerFleet: f, repo: repo, remote: remote}
}

// create creates the agent (its session opens on a worker when one is
// listed).
func (f *awayFleet) create(t testing.TB) {
	t.Helper()
	f.agent = f.d.callN("agent.create", map[string]any{"name": "coder", "provider": "scripted", "model": filepath.Join(f.d.dir, "work"),
		"workspace": map[string]any{"repo": f.repo}})["agent_id"].(string)
}

// notes is notes.md of the agent's workspace on the daemon's machine.
func (f *awayFleet) notes(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.d.Home, "workspaces", f.agent, "notes.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// begunOn waits until the agent's turn msg has begun in a worker's copy
// of its workspace (workScript's first line) and returns that worker.
func (f *awayFleet) begunOn(t *testing.T, msg string) string {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; {
		for id, w := range f.workers {
			matches, _ := filepath.Glob(filepath.Join(w.home, "*", "workspaces", f.agent, "notes.md"))
			for _, m := range matches {
				if b, _ := os.ReadFile(m); strings.Contains(string(b), "begun: "+msg) {
					return id
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the turn %q never began on a worker\ndaemon:\n%s", msg, tailString(f.d.Output(), 4000))
		}
		time.Sleep(20 * time.Millisecond) // the agent's file on the worker is the only sign of its progress
	}
}

// endSnapshots are the agent's logged end snapshots: commit -> worker.
func (f *awayFleet) endSnapshots(t *testing.T) (commits, workers []string) {
	t.Helper()
	for _, d := range eventsNamed(t, f.d, f.agent, "workspace.snapshot") {
		if d["at"] == "end" {
			commits, workers = append(commits, str(d["commit"])), append(workers, str(d["worker"]))
		}
	}
	return commits, workers
}

// TestWorkspaceOnAWorker: an agent with a workspace whose entry names an
// agents' remote runs on a worker, in the worker's copy of its
// workspace; after each turn its work is in the daemon's worktree, the
// end snapshot the worker took is logged with the worker's name and is
// what the remote holds, and the agent's branch is on the remote. Each
// turn starts from the daemon's worktree as it is: after an operator's
// restore between two turns, the worker's copy follows it.
func TestWorkspaceOnAWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test starts a daemon and a warren worker process; run without -short")
	}
	t.Parallel()
	f := startAwayFleet(t, 1)
	send := func(msg, want string) {
		t.Helper()
		cwd := str(f.d.callN("agent.send", map[string]any{"agent_id": f.agent, "message": msg})["response"])
		if suffix := filepath.Join("workspaces", f.agent); !strings.HasPrefix(cwd, f.workers["w1"].home) || !strings.HasSuffix(cwd, suffix) {
			t.Fatalf("turn %q ran in %s, want the worker's copy under %s ending in %s", msg, cwd, f.workers["w1"].home, suffix)
		}
		if got := f.notes(t); got != want {
			t.Fatalf("after turn %q the daemon's worktree holds:\n%s\nwant:\n%s", msg, got, want)
		}
	}
	send("one", "# notes\nbegun: one\ndone: one\n")
	send("two", "# notes\nbegun: one\ndone: one\nbegun: two\ndone: two\n")
	commits, workers := f.endSnapshots(t)
	if len(commits) != 2 || workers[0] != "w1" || workers[1] != "w1" {
		t.Fatalf("end snapshots %v taken by %v, want two by w1", commits, workers)
	}
	if got := runGit(t, f.remote, "rev-parse", "refs/warren/incoming/"+f.agent); got != commits[1] {
		t.Errorf("the remote holds %s, want the last end snapshot %s", got, commits[1])
	}
	// The operator puts the first turn's end back; the next turn on the
	// worker starts there, not from the worker's copy of turn two.
	f.d.callN("workspace.restore", map[string]any{"agent_id": f.agent, "commit": commits[0]})
	send("three", "# notes\nbegun: one\ndone: one\nbegun: three\ndone: three\n")
	commits, _ = f.endSnapshots(t)
	branch := runGit(t, filepath.Join(f.d.Home, "workspaces", f.agent), "symbolic-ref", "--short", "HEAD")
	if got, want := runGit(t, f.remote, "rev-parse", "refs/heads/"+branch), runGit(t, f.repo, "rev-parse", branch); got != want {
		t.Errorf("the remote's %s is %s, the daemon's %s", branch, got, want)
	}
	if got := runGit(t, f.repo, "rev-parse", "refs/warren/snapshots/"+f.agent); got != commits[2] {
		t.Errorf("the daemon's snapshot ref is %s, want %s", got, commits[2])
	}
	// Terminated, the agent leaves no incoming ref on the remote; its
	// branch, its work, stays.
	f.d.callN("agent.terminate", map[string]any{"agent_id": f.agent})
	refs := runGit(t, f.remote, "for-each-ref", "--format=%(refname)")
	if strings.Contains(refs, "refs/warren/incoming/"+f.agent) || !strings.Contains(refs, "refs/heads/"+branch) {
		t.Errorf("after the agent's terminate the remote holds %q; want its branch %s and no incoming ref", refs, branch)
	}
}

// TestWorkspaceCancelledTurnOnAWorkerComesHome: a turn on a worker
// cancelled after the agent wrote half its work: what it wrote is in the
// daemon's worktree and in the turn's end snapshot, which the worker
// took, as a local agent's work stays in its worktree; the next turn
// starts from it. A turn that fails leaves what it wrote the same way.
func TestWorkspaceCancelledTurnOnAWorkerComesHome(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test starts a daemon and a warren worker process; run without -short")
	}
	t.Parallel()
	f := startAwayFleet(t, 1)
	f.d.callN("agent.send", map[string]any{"agent_id": f.agent, "message": "first"})
	msg := "wait " + filepath.Join(f.d.dir, "never")
	res := make(chan error, 1)
	go func() {
		_, err := f.d.Client().Call(procCtx(t), "agent.send", map[string]any{"agent_id": f.agent, "message": msg})
		res <- err
	}()
	f.begunOn(t, msg)
	f.d.callN("agent.cancel", map[string]any{"agent_id": f.agent})
	select {
	case err := <-res:
		if err == nil {
			t.Fatal("the cancelled turn answered as if it had completed")
		}
	case <-time.After(time.Minute):
		t.Fatalf("the cancelled turn did not end\ndaemon:\n%s", tailString(f.d.Output(), 6000))
	}
	want := "# notes\nbegun: first\ndone: first\nbegun: " + msg + "\n"
	if got := f.notes(t); got != want {
		t.Fatalf("after the cancel the daemon's worktree holds:\n%s\nwant what the agent wrote before it:\n%s", got, want)
	}
	commits, workers := f.endSnapshots(t)
	if len(commits) != 2 || workers[1] != "w1" {
		t.Fatalf("end snapshots %v taken by %v; want the cancelled turn's taken by w1", commits, workers)
	}
	if got := runGit(t, f.repo, "show", commits[1]+":notes.md"); got+"\n" != want {
		t.Errorf("the cancelled turn's end snapshot holds notes.md:\n%s\nwant:\n%s", got, want)
	}
	f.d.callN("agent.send", map[string]any{"agent_id": f.agent, "message": "after"})
	want += "begun: after\ndone: after\n"
	if got := f.notes(t); got != want {
		t.Fatalf("the next turn's worktree holds:\n%s", got)
	}
	// A turn that fails (the program exits non-zero: a permanent failure)
	// leaves what it wrote too.
	if _, err := f.d.Client().Call(procCtx(t), "agent.send", map[string]any{"agent_id": f.agent, "message": "fail"}); err == nil {
		t.Fatal("the failing turn answered as if it had completed")
	}
	want += "begun: fail\n"
	if got := f.notes(t); got != want {
		t.Fatalf("after the failed turn the daemon's worktree holds:\n%s\nwant:\n%s", got, want)
	}
	if commits, workers := f.endSnapshots(t); len(commits) != 4 || workers[3] != "w1" {
		t.Fatalf("end snapshots %v taken by %v; want the failed turn's taken by w1", commits, workers)
	}
}

// TestWorkspaceSuspendedTurnOnAWorkerComesHome: a turn on a worker that
// writes to its workspace and then suspends its run (await_input through
// the worker's socket for the agent) hands what it wrote back: the
// daemon's worktree holds it while the run waits, and the answer with
// keep_workspace re-runs the run on it, so the workspace ends as a local
// agent's does (the same script, the same messages, on the daemon's
// machine): with the first attempt's line and the re-run's.
func TestWorkspaceSuspendedTurnOnAWorkerComesHome(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test starts a daemon and a warren worker process; run without -short")
	}
	t.Parallel()
	run := func(f *awayFleet) (waiting, after string) {
		t.Helper()
		f.d.callN("agent.send", map[string]any{"agent_id": f.agent, "message": "first"})
		res := f.d.callN("agent.send", map[string]any{"agent_id": f.agent, "message": "ask"})
		if res["status"] != "suspended" {
			t.Fatalf("the asking turn answered %v, want its run suspended", res)
		}
		waiting = f.notes(t)
		f.d.callN("agent.resume", map[string]any{"agent_id": f.agent, "token": res["token"], "response": "yes", "keep_workspace": true})
		f.d.callN("agent.send", map[string]any{"agent_id": f.agent, "message": "last"})
		return waiting, f.notes(t)
	}
	away := startAwayFleet(t, 1)
	awayWaiting, awayAfter := run(away)
	local := newAwayFleet(t, 1, false)
	local.create(t)
	localWaiting, localAfter := run(local)
	if want := "# notes\nbegun: first\ndone: first\nbegun: ask\n"; awayWaiting != want || localWaiting != want {
		t.Fatalf("while the run waits the daemon's worktree holds:\n%s\nwant what the agent wrote before it asked (a local agent's holds:\n%s)", awayWaiting, localWaiting)
	}
	// Both attempts' lines: the first attempt's came home, and the re-run
	// (its prompt says it runs on those files) added its own.
	if awayAfter != localAfter || strings.Count(awayAfter, "begun: ask") != 2 || !strings.Contains(awayAfter, "answered: yes\n") {
		t.Fatalf("after the resumed run and a turn on the worker the worktree holds:\n%s\nwant what a local agent's holds, both attempts' lines and the answer:\n%s", awayAfter, localAfter)
	}
	_, workers := away.endSnapshots(t)
	if len(workers) == 0 || workers[len(workers)-1] != "w1" {
		t.Fatalf("end snapshots taken by %v; want the last turn's taken by w1", workers)
	}
}

// TestWorkspaceWorkerKilledMidTurn: the worker running a turn is killed
// with SIGKILL after the agent wrote half its work in the worker's copy;
// the turn is tried again on the other worker, from the daemon's
// worktree as the turn found it, and its work reaches the daemon once:
// the half the lost attempt wrote is not there twice.
func TestWorkspaceWorkerKilledMidTurn(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test starts a daemon and warren worker processes; run without -short")
	}
	t.Parallel()
	f := startAwayFleet(t, 2)
	f.d.callN("agent.send", map[string]any{"agent_id": f.agent, "message": "first"})
	_, workers := f.endSnapshots(t)
	first := workers[0]
	release := filepath.Join(f.d.dir, "release")
	msg := "wait " + release
	res := make(chan map[string]any, 1)
	go func() {
		r, err := f.d.Client().Call(procCtx(t), "agent.send", map[string]any{"agent_id": f.agent, "message": msg})
		if err != nil {
			r = map[string]any{"error": err.Error()}
		}
		res <- r
	}()
	// The half turn in the worker's copy, then the worker is killed.
	holder := f.begunOn(t, msg)
	t.Logf("the first turn ran on %s, the second began on %s", first, holder)
	f.kill9(holder)
	writeFile(t, release, "go\n")
	var r map[string]any
	select {
	case r = <-res:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the turn did not end after its worker was killed\ndaemon:\n%s", tailString(f.d.Output(), 6000))
	}
	if r["error"] != nil {
		t.Fatalf("the turn after its worker was killed: %v", r["error"])
	}
	want := "# notes\nbegun: first\ndone: first\nbegun: " + msg + "\ndone: " + msg + "\n"
	if got := f.notes(t); got != want {
		t.Fatalf("the daemon's worktree holds:\n%s\nwant the interrupted turn's work once:\n%s", got, want)
	}
	_, workers = f.endSnapshots(t)
	if len(workers) != 2 || workers[1] == holder || workers[1] == "" {
		t.Fatalf("end snapshots taken by %v; the second must be the other worker's, not %s's", workers, holder)
	}
}

// TestWorkspaceWorkerKilledAtEveryGitCall kills the worker with SIGKILL
// at each git call it makes for a workspace (taking it up at the open
// and at the attempt, handing it back), before the call and after it
// (every third call; every call with WARREN_LONG). The turn completes on
// the daemon's machine, the only place left, from the daemon's worktree.
// Then the worker starts again, the daemon restarts, and the agent's next
// turn opens on the worker, on whatever copy the kill left there. Both
// turns' work is in the daemon's worktree, once each.
func TestWorkspaceWorkerKilledAtEveryGitCall(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test starts a daemon and warren worker processes; run without -short")
	}
	t.Parallel()
	realGit, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	every := 3
	if os.Getenv("WARREN_LONG") != "" {
		every = 1
	}
	scenario := func(t *testing.T, killAt int, mode string) (calls int) {
		bin := t.TempDir()
		writeFile(t, filepath.Join(bin, "git"), gitWrapper)
		if err := os.Chmod(filepath.Join(bin, "git"), 0o700); err != nil {
			t.Fatal(err)
		}
		counter := filepath.Join(bin, "calls")
		f := newAwayFleet(t, 0, true)
		f.env = map[string][]string{"w1": {"PATH=" + bin + ":" + os.Getenv("PATH"), "GIT_COUNTER=" + counter,
			"KILL_AT=" + strconv.Itoa(killAt), "KILL_MODE=" + mode, "REAL_GIT=" + realGit}}
		f.start("w1", 4)
		f.waitListed("w1")
		f.create(t)
		first := str(f.d.callN("agent.send", map[string]any{"agent_id": f.agent, "message": "one"})["response"])
		b, _ := os.ReadFile(counter)
		calls, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		if home := filepath.Join(f.d.Home, "workspaces", f.agent); killAt > 0 && first != home {
			t.Fatalf("kill at call %d %s: the first turn ran in %s, want the daemon's worktree %s (the worker was killed)", killAt, mode, first, home)
		}

		f.kill9("w1")
		f.mu.Lock()
		f.env = nil
		f.mu.Unlock()
		f.d.Restart()
		f.start("w1", 4)
		f.waitListed("w1")
		cwd := str(f.d.callN("agent.send", map[string]any{"agent_id": f.agent, "message": "two"})["response"])
		if !strings.HasPrefix(cwd, f.workers["w1"].home) {
			t.Fatalf("kill at call %d %s: the second turn ran in %s, not on the worker", killAt, mode, cwd)
		}
		if got, want := f.notes(t), "# notes\nbegun: one\ndone: one\nbegun: two\ndone: two\n"; got != want {
			t.Fatalf("kill at call %d %s: the daemon's worktree holds:\n%s\nwant each turn's work once:\n%s", killAt, mode, got, want)
		}
		return calls
	}
	total := scenario(t, 0, "") // no kill: how many calls there are
	if total < 10 {
		t.Fatalf("the worker made %d git calls for the open and a turn; the wrapper is not in its way", total)
	}
	for _, mode := range []string{"before", "after"} {
		n := 0
		for at := 1; at <= total; at += every {
			if calls := scenario(t, at, mode); calls != at {
				t.Fatalf("kill at call %d %s: the worker made %d calls", at, mode, calls)
			}
			n++
		}
		t.Logf("%s: %d kills over the %d git calls of the open and a turn", mode, n, total)
	}
}

// TestWorkspaceFallsBackWhenTheRemoteIsGone: the agents' remote goes away
// between two turns of an agent on a worker. The next turn cannot hand
// the workspace out: the daemon gives the session up, and its open again
// finds no way to hand the workspace to a worker, so the turn runs on the
// daemon's machine, in the worktree, with the first turn's work there.
func TestWorkspaceFallsBackWhenTheRemoteIsGone(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test starts a daemon and a warren worker process; run without -short")
	}
	t.Parallel()
	f := startAwayFleet(t, 1)
	if cwd := str(f.d.callN("agent.send", map[string]any{"agent_id": f.agent, "message": "one"})["response"]); !strings.HasPrefix(cwd, f.workers["w1"].home) {
		t.Fatalf("the first turn ran in %s, not on the worker", cwd)
	}
	if err := os.Rename(f.remote, f.remote+".gone"); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(f.d.Home, "workspaces", f.agent)
	if cwd := str(f.d.callN("agent.send", map[string]any{"agent_id": f.agent, "message": "two"})["response"]); cwd != home {
		t.Fatalf("with the remote gone, the turn ran in %s, want the daemon's worktree %s", cwd, home)
	}
	if got, want := f.notes(t), "# notes\nbegun: one\ndone: one\nbegun: two\ndone: two\n"; got != want {
		t.Fatalf("the daemon's worktree holds:\n%s\nwant:\n%s", got, want)
	}
	if out := f.d.Output(); !strings.Contains(out, "the workspace could not be handed to a worker; opening the session locally") {
		t.Errorf("the daemon did not say why the session opened locally:\n%s", tailString(out, 3000))
	}
}

// TestMergeWaitsForATurnOnAWorker: while an agent's turn runs on a worker,
// in the worker's copy of its workspace, a merge of its child into its
// workspace is refused (code 2, naming the worker and what to do): it
// would be undone when the turn comes home, or undo the turn. After the
// turn it merges, and both the turn's work and the child's are there.
func TestMergeWaitsForATurnOnAWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test starts a daemon and a warren worker process; run without -short")
	}
	t.Parallel()
	f := startAwayFleet(t, 1)
	kid := f.d.callN("agent.create", map[string]any{"name": "kid", "provider": "scripted", "model": filepath.Join(f.d.dir, "work"),
		"parent": f.agent, "workspace": map[string]any{"repo": f.repo}})["agent_id"].(string)
	writeFile(t, filepath.Join(f.d.Home, "workspaces", kid, "kid.txt"), "the child's work\n")
	release := filepath.Join(f.d.dir, "release")
	msg := "wait " + release
	done := make(chan error, 1)
	go func() {
		_, err := f.d.Client().Call(procCtx(t), "agent.send", map[string]any{"agent_id": f.agent, "message": msg})
		done <- err
	}()
	if on := f.begunOn(t, msg); on != "w1" {
		t.Fatalf("the turn began on %s, not w1", on)
	}
	_, err := f.d.Client().Call(procCtx(t), "workspace.merge", map[string]any{"agent_id": kid})
	wantCode(t, "a merge into a workspace whose turn runs on a worker", err, protocol.CodeInvalid)
	if !strings.Contains(err.Error(), "worker w1") || !strings.Contains(err.Error(), "after the turn") {
		t.Errorf("the refusal does not say where the turn runs and what to do: %v", err)
	}
	writeFile(t, release, "go\n")
	if err := <-done; err != nil {
		t.Fatalf("the turn: %v", err)
	}
	f.d.callN("workspace.merge", map[string]any{"agent_id": kid})
	ws := filepath.Join(f.d.Home, "workspaces", f.agent)
	if b, err := os.ReadFile(filepath.Join(ws, "kid.txt")); err != nil || string(b) != "the child's work\n" {
		t.Errorf("the child's work after the merge: %q %v", b, err)
	}
	if got, want := f.notes(t), "# notes\nbegun: "+msg+"\ndone: "+msg+"\n"; got != want {
		t.Errorf("the turn's work after the merge:\n%s\nwant:\n%s", got, want)
	}
}
