package tests

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/warren-dev/warren/protocol"
)

// TestLowFileLimitSizesTheOpenLogs (D16): a daemon started with a hard
// RLIMIT_NOFILE of 300 (soft 100) raises its soft limit and sizes its cap
// on open logs from it, so 400 agents created by four clients at once,
// each sent a message, all succeed, and its log holds no "too many open
// files" (before, creates past about 270 agents failed with EMFILE and the
// log filled with it).
func TestLowFileLimitSizesTheOpenLogs(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, modeBinary)
	d.shell = "ulimit -Sn 100 && ulimit -Hn 300"
	d.Start()
	if lim := procLimit(t, d.Pid(), "Max open files"); lim != "300" {
		t.Fatalf("the daemon's hard open-files limit is %q, want 300 (the shell's ulimit did not apply)", lim)
	}
	const agents, clients = 400, 4
	var wg sync.WaitGroup
	errs := make(chan error, 2*agents)
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			cl, err := protocol.Dial(context.Background(), d.Sock)
			if err != nil {
				errs <- err
				return
			}
			defer cl.Close()
			for i := c; i < agents; i += clients {
				res, err := cl.Call(procCtx(t), "agent.create", map[string]any{"name": fmt.Sprintf("a%d", i), "instructions": "x", "provider": "inproc", "model": "echo"})
				if err != nil {
					errs <- fmt.Errorf("create a%d: %w", i, err)
					continue
				}
				if _, err := cl.Call(procCtx(t), "agent.send", map[string]any{"agent_id": res["agent_id"], "message": "hi"}); err != nil {
					errs <- fmt.Errorf("send to a%d: %w", i, err)
				}
			}
		}(c)
	}
	wg.Wait()
	close(errs)
	var failed []string
	for err := range errs {
		failed = append(failed, err.Error())
	}
	if len(failed) > 0 {
		t.Fatalf("%d of %d creates and sends failed under a 300-descriptor limit; first: %s", len(failed), 2*agents, failed[0])
	}
	if n := d.callN("daemon.status", nil)["agents"]; fmt.Sprint(n) != strconv.Itoa(agents) {
		t.Fatalf("daemon.status agents = %v, want %d", n, agents)
	}
	out := d.Output()
	if n := strings.Count(out, "too many open files"); n > 0 {
		t.Fatalf("the daemon's log has %d lines with \"too many open files\"", n)
	}
	if !strings.Contains(out, "max_open_logs=") {
		t.Errorf("the daemon's log does not give the open-log cap it sized:\n%.2000s", out)
	}
}

// procLimit is the hard value of a limit in /proc/<pid>/limits.
func procLimit(t *testing.T, pid int, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "limits"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, name); ok {
			if f := strings.Fields(rest); len(f) >= 2 {
				return f[1]
			}
		}
	}
	t.Fatalf("/proc/%d/limits has no %q line", pid, name)
	return ""
}
