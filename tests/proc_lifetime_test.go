package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/warren-dev/warren/agentproc"
)

// lifelineScript: "effect DIR NAME" writes its pid to DIR/NAME.pid, waits
// until its parent (the daemon) is gone, then after a moment does its side
// effect, DIR/NAME.effect. "orphan DIR NAME" starts a grandchild in its own
// process group, writes "PID GRANDCHILD" to DIR/NAME.pid and waits. Neither
// finishes its turn while the daemon lives.
const lifelineScript = `import os, subprocess, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from warren_script import read_turn, done

def publish(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.rename(path + ".tmp", path)

while True:
    words = read_turn().split(" ")
    base = os.path.join(words[1], words[2])
    if words[0] == "effect":
        parent = os.getppid()
        publish(base + ".pid", str(os.getpid()))
        while os.getppid() == parent:
            time.sleep(0.02)
        time.sleep(0.3)
        publish(base + ".effect", "done after the daemon died")
        done("effect")
    elif words[0] == "orphan":
        child = subprocess.Popen(["sleep", "600"])
        publish(base + ".pid", "%d %d" % (os.getpid(), child.pid))
        while True:
            time.sleep(60)
`

// procBound bounds the waits for processes to die.
const procBound = 15 * time.Second

// waitFile polls for a file the script writes (bounded).
func waitFile(t *testing.T, path string) string {
	t.Helper()
	deadline := time.Now().Add(procReadyDeadline)
	for {
		if b, err := os.ReadFile(path); err == nil {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within %v", path, procReadyDeadline)
		}
		time.Sleep(10 * time.Millisecond) // the script writes it; no signal crosses processes
	}
}

// waitGroupEmpty polls /proc until no process is in process group pgid.
func waitGroupEmpty(t *testing.T, pgid int, what string) {
	t.Helper()
	deadline := time.Now().Add(procBound)
	for {
		members, err := agentproc.GroupMembers(pgid, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(members) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: process group %d still has processes %v %v after the daemon was killed", what, pgid, members, procStates(members))
		}
		time.Sleep(10 * time.Millisecond) // /proc has no change notification
	}
}

func procStates(pids []int) []string {
	var out []string
	for _, p := range pids {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(p) + "/stat")
		out = append(out, strings.TrimSpace(string(b)))
	}
	return out
}

// TestAgentProcessesDieWithTheDaemon kills the built daemon with SIGKILL
// while two scripts are mid-turn. The first dies with the daemon at once
// (its process group empties without a restart) and never does the side
// effect it would do after the daemon's death. The second left a grandchild
// in its group, which the parent-death signal does not reach: the next
// daemon kills it at recovery, from the record of the group.
func TestAgentProcessesDieWithTheDaemon(t *testing.T) {
	d := startTestDaemon(t, modeBinary)
	writeScripts(t, d.dir)
	script := filepath.Join(d.dir, "lifeline")
	if err := os.WriteFile(script, []byte("#!"+procPython+"\n"+lifelineScript), 0o700); err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(d.dir, "work")
	if err := os.Mkdir(work, 0o700); err != nil {
		t.Fatal(err)
	}
	eff := d.createAgent("eff", "scripted", script, "")
	orph := d.createAgent("orph", "scripted", script, "")
	for id, msg := range map[string]string{eff: "effect " + work + " eff", orph: "orphan " + work + " orph"} {
		go func() {
			// Answered with an error when the daemon is killed.
			_, _ = d.Client().Call(procCtx(t), "agent.send", map[string]any{"agent_id": id, "message": msg})
		}()
	}
	effPid, err := strconv.Atoi(waitFile(t, filepath.Join(work, "eff.pid")))
	if err != nil {
		t.Fatal(err)
	}
	var orphPid, grandchild int
	if _, err := fmt.Sscanf(waitFile(t, filepath.Join(work, "orph.pid")), "%d %d", &orphPid, &grandchild); err != nil {
		t.Fatal(err)
	}
	recs, err := os.ReadDir(filepath.Join(d.Home, "procs"))
	if err != nil || len(recs) != 2 {
		t.Fatalf("procs/ holds %v (%v), want the records of both scripts", recs, err)
	}

	d.Kill()
	waitGroupEmpty(t, effPid, "the script mid-turn")
	if _, err := os.Stat(filepath.Join(work, "eff.effect")); err == nil {
		t.Fatal("the script did its side effect after the daemon was killed")
	}
	// The second script's leader died with the daemon; its grandchild
	// is still in the group (reparented), for recovery to kill.
	deadline := time.Now().Add(procBound)
	for {
		if _, err := os.Stat("/proc/" + strconv.Itoa(orphPid)); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("script %d outlived the daemon", orphPid)
		}
		time.Sleep(10 * time.Millisecond) // /proc has no change notification
	}
	if members, _ := agentproc.GroupMembers(orphPid, 0); len(members) != 1 || members[0] != grandchild {
		t.Fatalf("group %d holds %v, want the grandchild %d alone before the restart", orphPid, members, grandchild)
	}

	d.Start()
	waitGroupEmpty(t, orphPid, "the grandchild left by the killed daemon's script, after recovery")
	if !strings.Contains(d.Output(), "killed a leftover agent process group") {
		t.Errorf("the daemon log does not report the leftover it killed:\n%s", d.Output())
	}
	// The killed daemon's records are gone (the resume policy's re-runs
	// start processes of their own, with records of their own).
	recs, _ = os.ReadDir(filepath.Join(d.Home, "procs"))
	for _, r := range recs {
		for _, old := range []int{effPid, orphPid} {
			if strings.HasSuffix(r.Name(), "."+strconv.Itoa(old)+".json") {
				t.Errorf("procs/ still holds %s, a record of the killed daemon's process, after recovery", r.Name())
			}
		}
	}
}
