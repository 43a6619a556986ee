package engine

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/warren-dev/warren/checkpoint"
	"github.com/warren-dev/warren/config"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider/inproc"
)

// ckptHome builds, on a fresh in-memory home, a root and a child with
// turns, messages left pending and metadata, writes a checkpoint for each,
// and adds more history after them. Automatic checkpoints are off (every
// 10,000 entries), so the test decides when they are written.
func ckptHome(t *testing.T) (*harness, []*agent) {
	h := newHarness(t, func(h *harness) { h.noWake, h.ckptEvery, h.saveDelay = true, 10000, time.Hour }) // no background checkpoint races the ones the test writes
	root := h.create("root", "", "echo")
	child := h.create("child", root, "echo")
	ctx := context.Background()
	step := func(i int) {
		h.send(root, fmt.Sprintf("turn %d", i))
		if _, err := h.c.CallTool(ctx, root, "send_message", map[string]any{"recipient": "child", "text": fmt.Sprintf("message %d", i)}); err != nil {
			t.Fatal(err)
		}
		if _, err := h.c.CallTool(ctx, root, "set_metadata", map[string]any{"agent_name": "child", "key": "k", "value": fmt.Sprint(i)}); err != nil && !strings.Contains(err.Error(), "unknown tool") {
			t.Fatal(err)
		}
	}
	for i := 0; i < 3; i++ {
		step(i)
	}
	var agents []*agent
	for _, id := range []string{root, child} {
		a, _ := h.c.agent(id)
		agents = append(agents, a)
		h.c.ckpts.Write(a, 1)
		if a.Ckpt.Seq.Load() == 0 {
			t.Fatalf("no checkpoint written for %s", id)
		}
	}
	for i := 3; i < 5; i++ {
		step(i)
	}
	h.send(child, "a turn that takes the pending messages")
	step(5)
	// A message too large to stay resident: pending, its payload on disk.
	if _, err := h.c.CallTool(ctx, root, "send_message", map[string]any{"recipient": "child", "text": strings.Repeat("large ", 2*residentPayload/6+1)}); err != nil {
		t.Fatal(err)
	}
	return h, agents
}

// TestCheckpointWriteCrashAtEveryOp crashes at every mutating op of a
// checkpoint write (process crash, power loss, and a power loss that keeps
// the unsynced rename of an unsynced file), then checks that recovering
// from whatever checkpoint the crash left equals a full fold of the logs.
func TestCheckpointWriteCrashAtEveryOp(t *testing.T) {
	// The ops of one write of both agents' checkpoints.
	h, agents := ckptHome(t)
	before := h.fs.MutatingOps()
	for _, a := range agents {
		h.c.ckpts.Write(a, 1)
	}
	n := h.fs.MutatingOps() - before
	if n < 4 {
		t.Fatalf("a checkpoint write of two agents took %d mutating ops; want at least create, write and rename each", n)
	}
	modes := []faultfs.RebootOptions{
		{Mode: faultfs.ProcessCrash},
		{Mode: faultfs.PowerLoss, Tail: faultfs.TailGarbage},
		{Mode: faultfs.PowerLoss, Tail: faultfs.TailZero, UnsyncedEntries: 1},
	}
	stats := &ckptStats{}
	for k := 1; k <= n+1; k++ {
		for mi, mode := range modes {
			t.Run(fmt.Sprintf("k=%d/mode=%d", k, mi), func(t *testing.T) {
				h, agents := ckptHome(t)
				h.ckptStats, h.ckptEvery = stats, config.DefaultCheckpointEvery
				h.fs.CrashAt(k)
				for _, a := range agents {
					h.c.ckpts.Write(a, 1)
				}
				h.fs.Crash()
				h.c.Abandon()
				mode.Rand = rand.New(rand.NewPCG(uint64(k), uint64(mi)))
				h.fs.Reboot(mode)
				h.checkCheckpointRecovery(h.fs)
				h.start() // and the daemon starts on these files
				h.send(agents[1].ID(), "after the crash")
			})
		}
	}
	// Every kind of outcome was reached: recovery from the old and the
	// new checkpoints, and from a torn one (a full fold).
	if stats.resumed == 0 || stats.checks != (n+1)*len(modes) {
		t.Fatalf("checkpoint crash runs: %s; want every run compared and some recovered from a checkpoint", stats)
	}
}

// TestTornCheckpointFallsBackToFullFold damages the checkpoint file in
// every way a crash or a stray write could: recovery ignores it, folds the
// whole log and gets the same state.
func TestTornCheckpointFallsBackToFullFold(t *testing.T) {
	h, agents := ckptHome(t)
	h.stop()
	path := filepath.Join(h.c.agentDir(agents[1].ID()), checkpoint.Name)
	good := h.read(path)
	if !strings.Contains(string(good), `"msg":{`) {
		t.Fatalf("the child's checkpoint holds no pending message kept without its payload:\n%s", good)
	}
	damage := map[string][]byte{
		"empty":          nil,
		"zeros":          make([]byte, len(good)),
		"cut in half":    good[:len(good)/2],
		"state changed":  []byte(strings.Replace(string(good), `"Name":"child"`, `"Name":"chilD"`, 1)),
		"other version":  []byte(strings.Replace(string(good), fmt.Sprintf(`"version":%d`, checkpoint.Version), `"version":9`, 1)),
		"line elsewhere": []byte(strings.Replace(string(good), `"off":`, `"off":1`, 1)),
	}
	for name, data := range damage {
		t.Run(name, func(t *testing.T) {
			if name != "empty" && string(data) == string(good) {
				t.Fatalf("the damage did not change the file")
			}
			h.rewrite(path, data)
			stats := &ckptStats{}
			h.ckptStats = stats
			h.checkCheckpointRecovery(h.fs)
			if stats.resumed != 1 {
				t.Fatalf("%d agents recovered from a checkpoint; want 1 (the root's, undamaged)", stats.resumed)
			}
		})
	}
}

// TestIdleAgentIsCheckpointedAtItsLogEnd: once an agent's turn has ended,
// its log is checkpointed at its last line SessionSaveDelay later, however
// few entries it grew by, so that a kill -9 leaves no tail to fold for
// agents at rest; recovering from that checkpoint folds nothing. The
// checkpoint the message's arrival asked for comes due while the turn
// still runs (so it is written in the middle of the turn), and the turn's
// own entries are logged while it is busy (too few to ask for one): the end
// of the turn must ask.
func TestIdleAgentIsCheckpointedAtItsLogEnd(t *testing.T) {
	h := newHarness(t, withFakeClock, func(h *harness) { h.noWake, h.saveDelay = true, time.Hour })
	release := make(chan struct{})
	started := make(chan *inproc.Turn, 1)
	h.prov.Register("slow", inproc.Signal(started, inproc.Block(release, inproc.Echo)))
	root := h.create("root", "", "slow")
	done := make(chan TurnResult, 1)
	go func() { res, _ := h.c.Send(context.Background(), root, "one turn", "", "", nil); done <- res }()
	<-started
	h.clock.Advance(time.Hour) // the arrival's checkpoint, while busy
	close(release)
	if res := <-done; res.Err != nil {
		t.Fatalf("turn: %v", res.Err)
	}
	h.quiet()
	h.clock.Advance(time.Hour)
	h.wantCheckpointAtLogEnd(root, "after the turn ended")
}

// TestAgentAtRestIsCheckpointedWhenItsLogGrows: a gated agent runs no turn,
// yet its log grows with every message sent to it; it is checkpointed at
// its log's end once SessionSaveDelay has passed, with one timer for the
// whole burst (not one per message).
func TestAgentAtRestIsCheckpointedWhenItsLogGrows(t *testing.T) {
	h := newHarness(t, withFakeClock, func(h *harness) { h.noWake, h.saveDelay = true, time.Hour })
	root := h.create("root", "", "echo")
	kid := h.create("kid", root, "echo")
	h.tool(root, "gate", map[string]any{"agent_name": "kid"})
	h.clock.Advance(time.Hour)
	h.wantCheckpointAtLogEnd(kid, "after the gate")
	for i := range 10 {
		h.tool(root, "send_message", map[string]any{"recipient": "kid", "text": fmt.Sprint("message ", i)})
	}
	if n := h.c.sched.Pending(); n != 2 {
		t.Fatalf("%d timers armed after a burst of 10 messages, want 2 (one checkpoint each for the sender and the gated agent)", n)
	}
	h.clock.Advance(time.Hour)
	h.wantCheckpointAtLogEnd(kid, "after 10 messages to the gated agent")
	if n := h.count(kid, "message.enqueued"); n != 10 {
		t.Fatalf("%d messages logged, want 10", n)
	}
}

// wantCheckpointAtLogEnd fails the test unless agent id's checkpoint, in
// memory and on disk, is at its log's last line.
func (h *harness) wantCheckpointAtLogEnd(id, when string) {
	h.t.Helper()
	a, _ := h.c.agent(id)
	ckpt := a.Ckpt.Seq.Load()
	last := look(a, func(p *projection, _ liveFlags) uint64 { return p.LastSeq })
	if ckpt == 0 || ckpt != last {
		h.t.Fatalf("%s: checkpoint at seq %d, log ends at %d; want the checkpoint at the log's end", when, ckpt, last)
	}
	r, err := readCheckpoint(h.c.fs, h.c.agentDir(id))
	if err != nil || r.Seq != last {
		h.t.Fatalf("%s: checkpoint on disk: seq %d, %v; want seq %d", when, r.Seq, err, last)
	}
}

// TestLongLastLineDamagedInsideIsFoundByTheScrub: a start checks a long
// checkpointed line (a big message waiting for a gated agent, the last
// line of its log after a kill -9) by its ends only, so that it need not
// read it whole; a byte changed inside it is found by the scrub that
// follows recovery, and the agent is listed corrupt: never served from a
// line that does not check out.
func TestLongLastLineDamagedInsideIsFoundByTheScrub(t *testing.T) {
	h := newHarness(t, withFakeClock, func(h *harness) { h.noWake, h.saveDelay = true, time.Hour })
	root := h.create("root", "", "echo")
	kid := h.create("kid", root, "echo")
	h.tool(root, "gate", map[string]any{"agent_name": "kid"})
	h.tool(root, "send_message", map[string]any{"recipient": "kid", "text": strings.Repeat("x", 100<<10)})
	h.clock.Advance(time.Hour)
	h.wantCheckpointAtLogEnd(kid, "after the long message")
	h.wantCheckpointAtLogEnd(root, "after sending it")
	h.fs.Crash()
	h.c.Abandon()
	h.fs.Reboot(faultfs.RebootOptions{Mode: faultfs.ProcessCrash})
	r, err := readCheckpoint(h.fs, h.c.agentDir(kid))
	if err != nil || r.Len < 100<<10 {
		t.Fatalf("the gated agent's checkpoint: %+v, %v; want it at the long message's line, its length recorded", r, err)
	}
	path := h.c.logPath(kid)
	data := h.read(path)
	if int64(len(data)) != r.Off+r.Len || data[r.Off+r.Len/2] != 'x' {
		t.Fatalf("the checkpoint's line (offset %d, %d bytes) is not the message at the end of the %d-byte log", r.Off, r.Len, len(data))
	}
	data[r.Off+r.Len/2] = 'y'
	h.rewrite(path, data)
	h.start()
	if h.report.Resumed != 2 {
		t.Fatalf("%d agents recovered from their checkpoint, want 2 (the long line's ends are intact)", h.report.Resumed)
	}
	<-h.c.scrubbed
	status := map[string]string{}
	for _, v := range h.c.List() {
		status[v.ID] = v.Status
	}
	if status[kid] != "corrupt" || status[root] == "corrupt" {
		t.Fatalf("after the scrub: kid %q, root %q; want the kid corrupt and the root serving", status[kid], status[root])
	}
	if got := h.read(path); !bytes.Equal(got, data) {
		t.Fatal("the damaged log was changed")
	}
}

// TestCheckpointWithoutLengthIsRewritten: a checkpoint from a build that
// did not record its line's length still serves a start, and the
// checkpoints after recovery write it again with the length, so that the
// next start checks a long line by its ends.
func TestCheckpointWithoutLengthIsRewritten(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.noWake = true })
	root := h.create("root", "", "echo")
	h.send(root, "one turn")
	h.stop()
	path := filepath.Join(h.c.agentDir(root), checkpoint.Name)
	good := h.read(path)
	old := regexp.MustCompile(`"len":[0-9]+,`).ReplaceAll(good, nil)
	if bytes.Equal(old, good) {
		t.Fatalf("the checkpoint records no length:\n%.200s", good)
	}
	h.rewrite(path, old)
	h.start()
	if h.report.Resumed != 1 {
		t.Fatalf("%d agents recovered from their checkpoint, want 1 (one without a length still serves)", h.report.Resumed)
	}
	<-h.c.scrubbed
	r, err := readCheckpoint(h.fs, h.c.agentDir(root))
	if err != nil || r.Len == 0 {
		t.Fatalf("the checkpoint after recovery: %+v, %v; want it written again with its line's length", r, err)
	}
}

// readCheckpoint reads the resume point of the checkpoint file in dir.
func readCheckpoint(fsys faultfs.FS, dir string) (eventlog.Resume, error) {
	data, err := faultfs.ReadFile(fsys, filepath.Join(dir, checkpoint.Name))
	if err != nil {
		return eventlog.Resume{}, err
	}
	_, r, err := checkpoint.Decode(data)
	return r, err
}
