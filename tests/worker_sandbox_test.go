package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSandboxedAgentOnAWorker runs the sandbox escape probe (issue 34)
// in an agent whose entry asks for a sandbox without network, placed on
// a worker: the worker builds the sandbox on its machine. Reads of the
// operator's files, the daemon's home and the worker's own token, writes
// outside the agent's directory, the daemon's socket and the network are
// all denied; writes in its work directory and its private home (under
// the worker's directory) work.
func TestSandboxedAgentOnAWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test starts a daemon and warren worker processes; run without -short")
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Fatal("bwrap is not installed (Debian package bubblewrap): the sandbox tests need it; .ci/run installs it")
	}
	f := startWorkerFleet(t, 1, 4, `{"providers": {"scripted": {"sandbox": {"type": "bwrap", "network": false}}}}`)
	d := f.d
	probe := filepath.Join(d.dir, "probe")
	writeFile(t, probe, "#!"+procPython+"\n"+probeScript)
	if err := os.Chmod(probe, 0o700); err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(d.dir, "work")
	outside := filepath.Join(d.dir, "outside")
	for _, dir := range []string{work, outside} {
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	secret := filepath.Join(outside, "secret.txt")
	planted := filepath.Join(d.dir, "worker-home-w1", "planted.txt")
	writeFile(t, secret, "the operator's secret\n")
	id := d.callN("agent.create", map[string]any{"name": "boxed", "provider": "scripted", "model": probe, "cwd": work})["agent_id"].(string)
	if !strings.Contains(d.Output(), "session placed: agent="+id+" worker=w1") {
		t.Fatalf("the sandboxed agent was not placed on w1:\n%s", tailString(d.Output(), 4000))
	}
	got := probeAgent(t, d, id, map[string]any{
		"read": []string{secret, filepath.Join(d.Home, "workers.json"), f.token("w1"),
			filepath.Join(d.Home, "agents", id, "events.jsonl")},
		"write": []string{filepath.Join(outside, "planted.txt"), "/etc/warren-escape", "/usr/warren-escape",
			planted, "own.txt", "/tmp/own.txt", "$HOME/own.txt"},
		"glob": filepath.Join(d.Home, "agents", "*", "events.jsonl"),
		"unix": []string{filepath.Join(d.Home, "daemon.sock")},
		"tcp":  strings.TrimPrefix(f.url, "nats://"),
	})
	t.Logf("inside, on the worker: %v", got)
	for k, v := range got {
		want := "denied"
		switch {
		case k == "write:own.txt" || k == "write:/tmp/own.txt" || k == "write:$HOME/own.txt":
			want = "ok"
		case k == "glob":
			want = "0 matches"
		case k == "write:"+planted:
			continue // under /tmp, which is private inside: checked on the host below
		}
		if !strings.HasPrefix(v, want) {
			t.Errorf("sandboxed on the worker, %s: %s, want %s", k, v, want)
		}
	}
	if len(got) != 4+7+1+1+1 {
		t.Errorf("the probe answered %d checks, want 14: %v", len(got), got)
	}
	for _, p := range []string{filepath.Join(outside, "planted.txt"), planted} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("the sandboxed agent planted %s outside its directory", p)
		}
	}
	if b, err := os.ReadFile(filepath.Join(work, "own.txt")); err != nil || string(b) != "escaped\n" {
		t.Errorf("own.txt in the work directory: %q, %v", b, err)
	}
	// Its private home is the worker's, under the worker's directory:
	// the sandbox was built there.
	if _, err := os.Stat(filepath.Join(d.dir, "worker-home-w1", "worker-w1", "agents", id, "home", "own.txt")); err != nil {
		entries, _ := filepath.Glob(filepath.Join(d.dir, "worker-home-w1", "worker-w1", "agents", id, "home", "*"))
		t.Errorf("the worker's private home for the agent does not hold what it wrote there: %v (%v)", err, entries)
	}
}

// TestSandboxedWorkspaceOnAWorker: a sandboxed agent with a workspace,
// on a worker through an agents' remote. Inside the worker's sandbox the
// agent works in the worker's copy and commits on its branch; it cannot
// make its copy's repository configure git (config.worktree, commondir,
// alternates are read-only) nor read the worker's token; and a git
// directory it makes and points its .git file at, whose config runs a
// command on every file git reads, does not run it for the worker's git
// (its hand-back, outside the sandbox). Its commit comes home on the
// daemon's branch.
func TestSandboxedWorkspaceOnAWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test starts a daemon and a warren worker process; run without -short")
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Fatal("bwrap is not installed (Debian package bubblewrap): the sandbox tests need it; .ci/run installs it")
	}
	t.Parallel()
	dir := t.TempDir()
	repo := gitRepo(t, dir)
	remote := filepath.Join(dir, "agents.git")
	runGit(t, dir, "clone", "-q", "--bare", repo, remote)
	f := startWorkerFleet(t, 1, 4, fmt.Sprintf(`{"providers": {"scripted": {"history": "context",
		"sandbox": {"type": "bwrap", "network": false}, "worker": {"remote": %q}}}}`, remote))
	d := f.d
	probe := filepath.Join(d.dir, "probe")
	writeFile(t, probe, "#!"+procPython+"\n"+probeScript)
	if err := os.Chmod(probe, 0o700); err != nil {
		t.Fatal(err)
	}
	id := d.callN("agent.create", map[string]any{"name": "boxed", "provider": "scripted", "model": probe,
		"workspace": map[string]any{"repo": repo}})["agent_id"].(string)
	if !strings.Contains(d.Output(), "session placed: agent="+id+" worker=w1") {
		t.Fatalf("the agent was not placed on w1:\n%s", tailString(d.Output(), 4000))
	}
	probeOn := func(spec map[string]any) map[string]string {
		t.Helper()
		got := probeAgent(t, d, id, spec)
		t.Logf("inside, on the worker: %v", got)
		for k, v := range got {
			want := "denied"
			if strings.HasPrefix(k, "own_") || k == "gitdir_file" {
				want = "ok"
			}
			if !strings.HasPrefix(v, want) {
				t.Errorf("sandboxed on the worker, %s: %s, want %s", k, v, want)
			}
		}
		return got
	}
	ws := filepath.Join(d.Home, "workspaces", id)
	if got := probeOn(map[string]any{"read": []string{f.token("w1")}, "own": true}); len(got) != 1+5 {
		t.Fatalf("the probe did not try everything: %v", got)
	}
	branch := runGit(t, ws, "symbolic-ref", "--short", "HEAD")
	if got := runGit(t, repo, "show", branch+":committed.txt"); got != "from inside" {
		t.Errorf("the commit made inside on the worker is not on the daemon's branch: %q", got)
	}
	marker := filepath.Join(d.dir, "filter-ran")
	if got := probeOn(map[string]any{"gitdir": map[string]any{"marker": marker}}); len(got) != 4 {
		t.Fatalf("the probe did not try everything: %v", got)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatal("git ran a command configured by a git directory the sandboxed agent made")
	}
	if b, err := os.ReadFile(filepath.Join(ws, "trap.txt")); err != nil || string(b) != "a new file for the filter\n" {
		t.Errorf("the turn's files did not come home: trap.txt %q %v", b, err)
	}
}
