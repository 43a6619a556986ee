package agentproc

import (
	"bufio"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warren-dev/warren/faultfs"
)

// waitGone polls /proc until pid is gone or a zombie (bounded).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return
		}
		s := string(b)
		if f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]); len(f) > 0 && f[0] == "Z" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs: %s", pid, b)
		}
		time.Sleep(10 * time.Millisecond) // /proc has no change notification
	}
}

// TestSpawnerChildSurvivesTheCallersThread: Go issue 27505. A child whose
// parent-death signal is set when it is forked from a thread that then
// exits is killed; one started through a Spawner (forked on its own thread)
// lives on, though the goroutine that asked for it ran on a thread that
// exited too, earlier.
func TestSpawnerChildSurvivesTheCallersThread(t *testing.T) {
	sp := NewSpawner()
	cat := exec.Command("cat")
	in, err := cat.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cat.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var proc *Proc
	done := make(chan error)
	onExitingThread(func() {
		p, err := sp.Start(cat)
		proc = p
		done <- err
	})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	defer func() { proc.KillGroup(); <-proc.Done() }()

	// The same thing without a Spawner: the child dies with the thread.
	direct := exec.Command("sleep", "600")
	direct.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	onExitingThread(func() { done <- direct.Start() })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = direct.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		_ = direct.Process.Kill()
		t.Fatal("the child forked from an exited thread was not killed: the test cannot show the difference")
	}
	if _, err := in.Write([]byte("ping\n")); err != nil {
		t.Fatalf("the Spawner's child is gone: %v", err)
	}
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ping\n" {
		t.Fatalf("the Spawner's child answered %q, %v", line, err)
	}
}

// onExitingThread runs f in a goroutine locked to a thread that exits when
// f returns. The main thread never exits (the runtime wedges it instead),
// so a goroutine that finds itself there leaves it locked and tries again
// on another one.
func onExitingThread(f func()) {
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if syscall.Gettid() == os.Getpid() {
			onExitingThread(f)
			select {} // keep the main thread out of the way
		}
		f()
	}()
}

// TestGroupDiesWithItsLeader: when a leader exits on its own, what it left
// in its process group is killed before it is reaped; KillGroup kills the
// whole group.
func TestGroupDiesWithItsLeader(t *testing.T) {
	sp := NewSpawner()
	for _, tc := range []struct {
		name   string
		script string
		kill   bool
	}{
		{"leader exits", "sleep 600 & echo $!", false},
		{"KillGroup", "sleep 600 & echo $!; wait", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("sh", "-c", tc.script)
			// Our own pipe: the reaper's cmd.Wait closes only those exec made.
			out, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close()
			cmd.Stdout = w
			p, err := sp.Start(cmd)
			_ = w.Close()
			if err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(out).ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			grandchild, err := strconv.Atoi(strings.TrimSpace(line))
			if err != nil {
				t.Fatal(err)
			}
			if tc.kill {
				p.KillGroup()
			}
			select {
			case <-p.Done():
			case <-time.After(15 * time.Second):
				t.Fatal("the leader was not reaped")
			}
			waitGone(t, grandchild)
			p.KillGroup() // after the reap: a no-op, never a signal to a reused group
		})
	}
}

// TestRecordsAndIdentity: a record names a live process by pid, start time
// and boot id; KillLeftover leaves a record whose start time differs alone
// and kills one that matches.
func TestRecordsAndIdentity(t *testing.T) {
	fsys := faultfs.NewMem()
	r := Records{FS: fsys, Dir: "/home/procs"}
	cmd := exec.Command("sleep", "600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	defer func() { _ = cmd.Process.Kill(); <-exited }()
	rec, err := Describe("0123456789abcdef0123456789abcdef", cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Pgid != rec.Pid || rec.StartTime == 0 || rec.BootID == "" {
		t.Fatalf("record %+v", rec)
	}
	if err := r.Add(rec); err != nil {
		t.Fatal(err)
	}
	if err := faultfs.WriteFile(fsys, "/home/procs/junk.json", []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	recs, bad, err := r.List()
	if err != nil || len(recs) != 1 || recs[0] != rec || len(bad) != 1 || bad[0].Name != "junk.json" {
		t.Fatalf("List = %v, %v, %v", recs, bad, err)
	}
	foreign := rec
	foreign.Pgid = os.Getpid() // a tampered record naming another group
	if killed, _, err := KillLeftover(foreign); killed || err == nil {
		t.Fatalf("a record whose group is not its pid: killed=%v err=%v", killed, err)
	}
	reused := rec
	reused.StartTime++
	if killed, _, err := KillLeftover(reused); killed || err != nil {
		t.Fatalf("a record whose start time differs: killed=%v err=%v", killed, err)
	}
	if killed, _, err := KillLeftover(rec); !killed || err != nil {
		t.Fatalf("the matching record: killed=%v err=%v", killed, err)
	}
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		t.Fatal("the recorded process still runs")
	}
	if err := r.Clear([]string{rec.FileName(), "junk.json"}); err != nil {
		t.Fatal(err)
	}
	if recs, bad, err := r.List(); len(recs)+len(bad) != 0 || err != nil {
		t.Fatalf("after Clear: %v, %v, %v", recs, bad, err)
	}
}
