package agentproc

import (
	"bufio"
	"errors"
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

// TestRecordsAndIdentity: a record names a live process by pid, start
// time, boot id and the marker in its environment; KillLeftover leaves a
// record whose start time differs alone and kills one that matches.
func TestRecordsAndIdentity(t *testing.T) {
	fsys := faultfs.NewMem()
	r := Records{FS: fsys, Dir: "/home/procs"}
	marker, err := NewMarker()
	if err != nil {
		t.Fatal(err)
	}
	cmd, exited := startSleep(t, EnvMarker+"="+marker)
	rec, err := Describe("0123456789abcdef0123456789abcdef", cmd.Process.Pid, marker)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Pgid != rec.Pid || rec.StartTime == 0 || rec.BootID == "" || rec.Marker != marker || !strings.HasSuffix(rec.Exe, "sleep") {
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

// startSleep starts "sleep 600" leading its own process group with env
// added to the test's environment; exited is closed once it is reaped.
func startSleep(t *testing.T, env ...string) (*exec.Cmd, chan struct{}) {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	return cmd, exited
}

// TestForgedRecordKillsNothing (D12): a record that names a live process
// exactly (pid, start time, boot id, even its executable) but whose marker
// that process does not carry, or that has no marker, is refused with
// ErrNotOurs, and the process, or its group whose leader is gone, lives.
func TestForgedRecordKillsNothing(t *testing.T) {
	cmd, exited := startSleep(t) // no marker: not one of ours
	marker, err := NewMarker()
	if err != nil {
		t.Fatal(err)
	}
	forged, err := Describe("0123456789abcdef0123456789abcdef", cmd.Process.Pid, marker)
	if err != nil {
		t.Fatal(err)
	}
	unmarked := forged
	unmarked.Marker = ""
	other, err := NewMarker()
	if err != nil {
		t.Fatal(err)
	}
	marked, markedExited := startSleep(t, EnvMarker+"="+other) // ours, but another record's
	wrong, err := Describe("0123456789abcdef0123456789abcdef", marked.Process.Pid, marker)
	if err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]Record{"forged marker": forged, "no marker": unmarked, "another process's marker": wrong} {
		killed, _, err := KillLeftover(r)
		if killed || !errors.Is(err, ErrNotOurs) {
			t.Fatalf("%s: killed=%v err=%v, want ErrNotOurs", name, killed, err)
		}
		if !strings.Contains(err.Error(), "sleep") {
			t.Errorf("%s: the error does not say what the process runs: %v", name, err)
		}
	}
	// A group whose leader is gone: its members are checked instead.
	leader, member := orphanedGroup(t, marker)
	if killed, _, err := KillLeftover(leader); killed || !errors.Is(err, ErrNotOurs) {
		t.Fatalf("a group whose leader is gone, no member marked: killed=%v err=%v", killed, err)
	}
	if err := syscall.Kill(member, 0); err != nil {
		t.Fatalf("the unmarked group member was killed: %v", err)
	}
	select {
	case <-exited:
		t.Fatal("the unmarked process was killed")
	case <-markedExited:
		t.Fatal("the process with another marker was killed")
	default:
	}
}

// orphanedGroup starts a process group whose leader (sh) exits leaving a
// member (sleep) running, with env added to their environment; it returns
// the leader's record (with marker) and the member's pid.
func orphanedGroup(t *testing.T, marker string, env ...string) (Record, int) {
	t.Helper()
	leader, member, sh := startGroup(t, marker, env...)
	if err := sh.Wait(); err != nil {
		t.Fatal(err)
	}
	return leader, member
}

// startGroup starts orphanedGroup's group and returns, with the leader's
// record and the member's pid, the leader's command, not yet waited for.
func startGroup(t *testing.T, marker string, env ...string) (Record, int, *exec.Cmd) {
	t.Helper()
	sh := exec.Command("sh", "-c", "sleep 600 & echo $!")
	sh.Env = append(os.Environ(), env...)
	sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := sh.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	leader, err := Describe("0123456789abcdef0123456789abcdef", sh.Process.Pid, marker)
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	member, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(member, syscall.SIGKILL) })
	// $! is printed right after the fork: wait until the member runs
	// sleep with its environment (a read of /proc/<pid>/environ in the
	// middle of its exec may show neither; CI saw such a read once).
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(member) + "/environ")
		cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(member) + "/cmdline")
		if strings.HasPrefix(string(cmdline), "sleep\x00") && hasAll(string(b), env) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the group's member %d did not run sleep with its environment within 10 s", member)
		}
		time.Sleep(time.Millisecond) // nothing signals the end of another process's exec
	}
	return leader, member, sh
}

// hasAll reports whether the NUL-separated environment environ holds
// every entry of env.
func hasAll(environ string, env []string) bool {
	have := map[string]bool{}
	for _, kv := range strings.Split(environ, "\x00") {
		have[kv] = true
	}
	for _, kv := range env {
		if !have[kv] {
			return false
		}
	}
	return true
}

// TestLeftoverGroupWithMarkedMemberIsKilled: the leader of a recorded
// group is gone and a member that inherited the marker still runs: the
// group is killed.
func TestLeftoverGroupWithMarkedMemberIsKilled(t *testing.T) {
	marker, err := NewMarker()
	if err != nil {
		t.Fatal(err)
	}
	leader, member := orphanedGroup(t, marker, EnvMarker+"="+marker)
	killed, what, err := KillLeftover(leader)
	if !killed || err != nil {
		t.Fatalf("killed=%v what=%q err=%v", killed, what, err)
	}
	waitGone(t, member)
}

// TestLeftoverGroupWithAZombieLeaderIsKilled: the recorded leader has
// exited but is not reaped yet (a zombie: its stat readable, its
// environment not), as a leader killed with the daemon often is when the
// next daemon starts; a marked member of its group still runs: the group
// is killed, not refused for want of the leader's marker.
func TestLeftoverGroupWithAZombieLeaderIsKilled(t *testing.T) {
	marker, err := NewMarker()
	if err != nil {
		t.Fatal(err)
	}
	leader, member, sh := startGroup(t, marker, EnvMarker+"="+marker)
	defer func() { _ = sh.Wait() }()
	waitGone(t, leader.Pid) // a zombie: exited, not waited for
	if st, err := readStat(leader.Pid); err != nil || st.state != 'Z' {
		t.Fatalf("the leader is not a zombie: %+v, %v", st, err)
	}
	killed, what, err := KillLeftover(leader)
	if !killed || err != nil {
		t.Fatalf("killed=%v what=%q err=%v", killed, what, err)
	}
	waitGone(t, member)
}
