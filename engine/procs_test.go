package engine

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/warren-dev/warren/agentproc"
	"github.com/warren-dev/warren/faultfs"
)

// leftover starts a process in its own group the way a previous daemon
// would have (no parent-death signal: it outlived its daemon), records it
// in the harness's home, and returns the command, a channel closed when it
// has been reaped, and what it printed first.
func leftover(t *testing.T, fsys faultfs.FS, agentID string, record func(*agentproc.Record), argv ...string) (*exec.Cmd, chan struct{}, *bufio.Reader, func(string)) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// The marker a daemon gives every agent process it starts: only a
	// process carrying its record's marker is killed as a leftover.
	marker, err := agentproc.NewMarker()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Env = append(os.Environ(), agentproc.EnvMarker+"="+marker)
	// Our own pipes: cmd.Wait (run below, concurrently) closes only those
	// exec made, and a leader may exit before we read what it wrote.
	inR, stdin, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stdin.Close(); _ = stdout.Close() })
	cmd.Stdin, cmd.Stdout = inR, outW
	err = cmd.Start()
	_ = inR.Close()
	_ = outW.Close()
	if err != nil {
		t.Fatal(err)
	}
	reaped := make(chan struct{})
	go func() { _ = cmd.Wait(); close(reaped) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-reaped
	})
	rec, err := agentproc.Describe(agentID, cmd.Process.Pid, marker)
	if err != nil {
		t.Fatal(err)
	}
	if record != nil {
		record(&rec)
	}
	if err := (agentproc.Records{FS: fsys, Dir: "/home/procs"}).Add(rec); err != nil {
		t.Fatal(err)
	}
	write := func(s string) {
		if _, err := stdin.Write([]byte(s)); err != nil {
			t.Fatalf("writing to process %d: %v", cmd.Process.Pid, err)
		}
	}
	return cmd, reaped, bufio.NewReader(stdout), write
}

// TestRecoveryKillsRecordedLeftovers: at start, the process group of a
// record whose pid and start time match a live process is killed (its
// grandchild included), so is a group whose leader is gone but whose
// members remain, and a process whose pid matches a record but whose start
// time does not is left alone. The records are removed.
func TestRecoveryKillsRecordedLeftovers(t *testing.T) {
	fsys := faultfs.NewMem()
	const agentA, agentB, agentC = "0123456789abcdef0123456789abcdef", "1123456789abcdef0123456789abcdef", "2123456789abcdef0123456789abcdef"
	// A: a live leader with a grandchild in its group.
	_, reapedA, outA, _ := leftover(t, fsys, agentA, nil, "sh", "-c", "sleep 600 & echo $!; wait")
	line, err := outA.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	grandA, err := strconv.Atoi(line[:len(line)-1])
	if err != nil {
		t.Fatal(err)
	}
	// B: a leader that exited on its own, leaving a member of its group.
	// It waits for a line before it exits, so that leftover can describe
	// it first (its start time is read from /proc while it runs).
	cmdB, reapedB, outB, writeB := leftover(t, fsys, agentB, nil, "sh", "-c", "sleep 600 & echo $!; read x")
	line, err = outB.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	grandB, err := strconv.Atoi(line[:len(line)-1])
	if err != nil {
		t.Fatal(err)
	}
	writeB("exit\n")
	<-reapedB
	// C: an unrelated process whose pid a stale record names (another
	// start time: the pid was reused).
	cmdC, reapedC, outC, writeC := leftover(t, fsys, agentC, func(r *agentproc.Record) { r.StartTime++ }, "cat")

	h := newHarness(t, func(h *harness) { h.fs = fsys })
	_ = h

	select {
	case <-reapedA: // the leader was killed: we reap it
	case <-time.After(15 * time.Second):
		t.Fatal("the recorded leftover whose pid and start time match still runs after recovery")
	}
	waitGone(t, grandA)
	waitGone(t, grandB)
	_ = cmdB
	// C answers after recovery returned: it was not sent SIGKILL (a
	// pending SIGKILL is acted on before the process runs again).
	writeC("ping\n")
	if got, err := outC.ReadString('\n'); err != nil || got != "ping\n" {
		t.Fatalf("the unrelated process %d: %q, %v; it was killed", cmdC.Process.Pid, got, err)
	}
	select {
	case <-reapedC:
		t.Fatal("the unrelated process was killed")
	default:
	}
	if entries, err := fsys.ReadDir("/home/procs"); err != nil || len(entries) != 0 {
		t.Fatalf("records left after recovery: %v, %v", entries, err)
	}
}

// waitGone polls /proc until pid is gone or a zombie (bounded).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil || zombie(string(b)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs: %s", pid, b)
		}
		time.Sleep(10 * time.Millisecond) // /proc has no change notification
	}
}

func zombie(stat string) bool {
	var state string
	for i := len(stat) - 1; i >= 0; i-- {
		if stat[i] == ')' {
			_, _ = fmt.Sscanf(stat[i+1:], " %s", &state)
			break
		}
	}
	return state == "Z"
}
