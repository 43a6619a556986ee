//go:build warren_daemon_bugs

// Reproductions of daemon bugs found by the socket tests. They fail on the
// current daemon and are kept out of the default suite until the daemon is
// fixed: run them with
//
//	go test -tags warren_daemon_bugs -run Bug ./tests/
//
// and move each into the normal suite when it passes.

package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
)

// waitLockAfterKill is false in this build: Kill returns as soon as the
// daemon is reaped and the restart follows at once, as a supervisor's
// would. Then TestTortureKill9 intermittently fails with "warren daemon
// already running ... the lock ... is held" although the killed daemon is
// dead and reaped. In the default build Kill measures it: the flock on
// daemon.lock stays held 10-100 ms after the reap (5 of 400 kills in one
// WARREN_LONG run), while /proc shows no process with the file open. A
// flock is released at the last fput of its open file description, which
// the kernel may defer after the process is gone; a POSIX record lock is
// released synchronously when the dying process closes its descriptors.
// Reproduce with
//
//	go test -tags warren_daemon_bugs -run TestTortureKill9 -race ./tests/
//
// Fix: take the lock with fcntl F_SETLK (F_WRLCK on the whole file)
// instead of flock (the daemon opens daemon.lock once, so the POSIX
// close-releases-all rule does not bite); or, when the lock is busy and the
// pid in daemon.pid is not alive, retry for a bounded moment (1-2 s)
// before saying "already running".
const waitLockAfterKill = false

// TestBugEventlogReadAllDataAliasesBuffer: since 0602cdb (positional fast
// path), an Entry's Data returned by the Reader is a slice of the
// scanner's line buffer (parseWriterLayout returns json.RawMessage(data)
// without a copy), so the next lines overwrite it. eventlog.ReadAll, which
// keeps all entries, then returns early entries whose Data are bytes of
// later lines. Found by the torture test ("log ... entry seq 1 changed
// after a restart": seq 1 agent.created came back with the data of a
// later turn.start). The daemon reads logs the same way (Core.Log for
// agent.log and events.subscribe replays; recovery, if it keeps Data).
// Fix: copy data in parseWriterLayout (or document the aliasing and copy
// in ReadAll and every caller that keeps an Entry).
func TestBugEventlogReadAllDataAliasesBuffer(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "events.jsonl")
	lg, err := eventlog.Open(faultfs.OS{}, path, eventlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 3000
	for i := 0; i < n; i++ {
		if _, err := lg.Append("test.event", map[string]any{"i": i, "pad": strings.Repeat("x", 100)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := lg.Close(); err != nil {
		t.Fatal(err)
	}
	entries, err := eventlog.ReadAll(faultfs.OS{}, path)
	if err != nil || len(entries) != n {
		t.Fatalf("ReadAll: %d entries, %v", len(entries), err)
	}
	for i, e := range entries {
		want := fmt.Sprintf(`"i":%d,`, i)
		if !bytes.Contains(e.Data, []byte(want)) {
			t.Fatalf("entry seq %d: Data = %.80s..., want the data appended with i=%d", e.Seq, e.Data, i)
		}
	}
}

// TestBugAgentLogReturnsOverwrittenData: the same aliasing seen over the
// socket: agent.log of an agent with a long log returns a first event
// whose data is not its agent.created data.
func TestBugAgentLogReturnsOverwrittenData(t *testing.T) {
	d := startTestDaemon(t, modeInProcess)
	id := d.createAgent("long", "inproc", "echo", "")
	msg := strings.Repeat("m", 2000)
	for i := 0; i < 60; i++ {
		d.callN("agent.send", map[string]any{"agent_id": "long", "message": fmt.Sprintf("%d %s", i, msg)})
	}
	res := d.callN("agent.log", map[string]any{"agent_id": "long"})
	first, _ := res["events"].([]any)[0].(map[string]any)
	data, _ := first["data"].(map[string]any)
	if first["event"] != "agent.created" || data["agent_id"] != id || data["name"] != "long" {
		b, _ := json.Marshal(first)
		t.Fatalf("agent.log first event = %.300s, want agent.created of %s", b, id)
	}
}
