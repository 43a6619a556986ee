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
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/protocol"
)

// waitLockAfterKill is false in this build: Kill returns as soon as the
// daemon is reaped and the restart follows at once, as a supervisor's
// would. Then TestTortureKill9 intermittently fails (seen in 2 of 3 full
// -race runs, at most a few of 50 kills) with "warren daemon already
// running ... the lock ... is held" although the killed daemon is reaped:
// something still holds the flock on daemon.lock for a few milliseconds.
// The likely holder is a scripted provider process the daemon was
// spawning at the kill (forked, not yet exec'd), which shares the lock's
// open file description until its exec closes the close-on-exec
// descriptor. Reproduce with
//
//	go test -tags warren_daemon_bugs -run TestTortureKill9 -race ./tests/
//
// Fix: a POSIX record lock (fcntl F_SETLK), which children never share,
// instead of flock; or retry the lock for a bounded moment when the pid in
// daemon.pid is not alive.
const waitLockAfterKill = false

// TestBugSubscribeSinceSeqRacesAgentCreate: events.subscribe without an
// agent and with since_seq replays the logs of tree.Walk(); an agent whose
// name is already in the tree but whose creation has not finished (its
// log is not registered yet) makes the whole subscription fail with code 1
// "agent ... not found". A subscription must not fail because an agent is
// being created at the same moment (skip it in the replay: its events come
// live).
func TestBugSubscribeSinceSeqRacesAgentCreate(t *testing.T) {
	d := startTestDaemon(t, modeInProcess)
	ctx := procCtx(t)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(stop)
		for i := 0; i < 200; i++ {
			if _, err := protocol.CallJSON(ctx, d.Sock, "agent.create", map[string]any{"name": fmt.Sprintf("c%d", i),
				"provider": "inproc", "model": "echo"}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	errSeen := errors.New("saw a live event")
	cl := d.Client()
	for {
		select {
		case <-stop:
			wg.Wait()
			return
		default:
		}
		// With a since_seq beyond every log, the replay sends nothing; the
		// first frame is a live event, which proves the replay succeeded.
		sub, cancel := context.WithCancel(ctx)
		err := cl.Stream(sub, "events.subscribe", map[string]any{"since_seq": 1 << 40}, func(protocol.Frame) error { return errSeen })
		cancel()
		if err != nil && !errors.Is(err, errSeen) && !errors.Is(err, context.Canceled) {
			t.Fatalf("events.subscribe with since_seq during agent creation: %v (code %d)", err, protocol.CodeOf(err))
		}
	}
}

// TestBugToolCallSpawnWhileBusyLostOnKill: tool.call spawn_agent on an
// agent that is in a turn (here a scripted turn blocked on a FIFO; in the
// torture test, a wake turn) answers {"status":"accepted","agent_id":..}
// at once but only queues the creation until the turn ends (deferSpawn).
// SIGKILL before the turn ends loses the acknowledged child: after the
// restart agent.list does not have it (SPEC 11.3: an acknowledged spawn
// exists after any crash). Either create the child before answering when
// the call comes from outside the turn, or make the queued spawn durable
// (the caller's tool.call entry already records it) and finish it at
// recovery.
func TestBugToolCallSpawnWhileBusyLostOnKill(t *testing.T) {
	d := startTestDaemon(t, modeBinary)
	script := writeScripts(t, d.dir)
	d.createAgent("boss", "scripted", script, "")
	blockScriptedTurn(t, d, "boss")
	res := d.callN("tool.call", map[string]any{"agent_id": "boss", "tool": "spawn_agent",
		"arguments": map[string]any{"name": "kid", "instructions": "k", "provider": "inproc", "model": "echo"}})
	kid, ok := res["agent_id"].(string)
	if !ok {
		t.Fatalf("spawn_agent = %v", res)
	}
	d.Kill()
	d.Start()
	if _, err := d.Client().Call(procCtx(t), "agent.inspect", map[string]any{"agent_id": kid}); err != nil {
		t.Fatalf("acknowledged spawn %s (tool.call result %v) is gone after kill -9: %v", kid, res, err)
	}
}

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
