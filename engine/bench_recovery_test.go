package engine

// Recovery benchmark (issue 6): time from NewCore+Recover start to the end
// of Recover (the point where the daemon would start serving), and the heap
// in use after recovery, for a home of 1,000 agents x 1,000 events each on
// the real disk, folding every log (full-fold) and from the checkpoints a
// clean stop leaves (from-checkpoints).
//
//	go test -run '^$' -bench 'BenchmarkRecovery' -benchtime 5x -timeout 30m ./engine/
//
// WARREN_BENCH_HOME=<dir> keeps the generated home there for later runs;
// WARREN_BENCH_RECOVERY_AGENTS=10000 sizes the home (rounded up to 100s);
// WARREN_BENCH_HEAPPROFILE=<file> writes a heap profile taken right after
// the first recovery (go tool pprof -sample_index=inuse_space).
//
// The home is generated once per run of the benchmark (genHome) with the
// eventlog package, so every line has a correct CRC and seq, and with the
// daemon's own event data types, so every entry is one the projection
// folds. Recovery runs with NoWake: agents with pending messages are not
// woken, so the home is the same for every iteration (waking runs turns,
// which is serving, not starting).

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/checkpoint"
	"github.com/warren-dev/warren/config"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/session"
)

// homeSpec sizes a generated home.
type homeSpec struct {
	Agents         int // a multiple of GroupSize
	EventsPerAgent int // at least 2
	GroupSize      int // one root and GroupSize-1 children per group
	// NoPendingFill ends each log with metadata.updated entries instead of
	// messages left pending (a home whose start wakes nobody).
	NoPendingFill bool `json:",omitempty"`
	// ResponsePad adds this many bytes to every turn.complete response
	// (larger histories for as many events).
	ResponsePad int `json:",omitempty"`
	// BigPending is the number of large (BigPayload-byte) messages left
	// pending, spread over the groups' first children, which are gated so
	// that no wake turn consumes them: they stay pending from run to run.
	BigPending int `json:",omitempty"`
	BigPayload int `json:",omitempty"`
}

// homeStats describes a generated home.
type homeStats struct {
	Events       int64
	Bytes        int64
	Pending      int   // messages enqueued and never delivered
	PendingBytes int64 `json:",omitempty"` // payload bytes of the large pending messages
}

// bigHolder reports whether agent i holds large pending messages (and is
// gated): the first child of each group.
func (s homeSpec) bigHolder(i int) bool { return s.BigPending > 0 && i%s.GroupSize == 1 }

// bigShare is how many large pending messages agent i holds.
func (s homeSpec) bigShare(i int) int {
	if !s.bigHolder(i) {
		return 0
	}
	holders := s.Agents / s.GroupSize
	g := i / s.GroupSize
	n := s.BigPending / holders
	if g < s.BigPending%holders {
		n++
	}
	return n
}

func BenchmarkRecovery(b *testing.B) {
	spec := homeSpec{Agents: 1000, EventsPerAgent: 1000, GroupSize: 100}
	if n, err := strconv.Atoi(os.Getenv("WARREN_BENCH_RECOVERY_AGENTS")); err == nil && n > 0 {
		spec.Agents = (n + spec.GroupSize - 1) / spec.GroupSize * spec.GroupSize
	}
	home, st := benchHome(b, os.Getenv("WARREN_BENCH_HOME"), spec)
	// Folding every log from its start (no checkpoints: the first start
	// after an upgrade), and from the checkpoints a clean stop leaves.
	b.Run(fmt.Sprintf("agents=%d/events=%d/full-fold", spec.Agents, spec.EventsPerAgent), func(b *testing.B) {
		benchRecover(b, home, spec, st, -1, 0)
	})
	b.Run(fmt.Sprintf("agents=%d/events=%d/from-checkpoints", spec.Agents, spec.EventsPerAgent), func(b *testing.B) {
		benchRecover(b, home, spec, st, 0, 0)
	})
	// The worst case a kill -9 leaves: every checkpoint 0 to
	// CheckpointEvery-1 entries behind its log (bench_killed_test.go), made
	// again before each recovery.
	b.Run(fmt.Sprintf("agents=%d/events=%d/lagged-checkpoints", spec.Agents, spec.EventsPerAgent), func(b *testing.B) {
		benchRecover(b, home, spec, st, 0, config.DefaultCheckpointEvery-1)
	})
}

// BenchmarkRecoveryPending is the home of issue 31's D11: 210,000
// messages of 1 KiB (the daemon-wide pending limit's order) held by 21
// gated agents, recovered with a full fold and from the checkpoints a
// clean stop leaves.
func BenchmarkRecoveryPending(b *testing.B) {
	spec := homeSpec{Agents: 42, EventsPerAgent: 20, GroupSize: 2, NoPendingFill: true, BigPending: 210000, BigPayload: 1024}
	home, st := benchHome(b, os.Getenv("WARREN_BENCH_HOME"), spec)
	b.Run("pending=210000x1KiB/full-fold", func(b *testing.B) { benchRecover(b, home, spec, st, -1, 0) })
	b.Run("pending=210000x1KiB/from-checkpoints", func(b *testing.B) { benchRecover(b, home, spec, st, 0, 0) })
}

// benchHome generates the home in a fresh benchmark directory, or, when
// home names a directory, reuses the home generated there by an earlier run
// with the same spec (generating it the first time).
func benchHome(b testing.TB, home string, spec homeSpec) (string, homeStats) {
	b.Helper()
	cached := home != ""
	marker := filepath.Join(home, "bench-home.json")
	type homeMarker struct {
		Spec  homeSpec
		Stats homeStats
	}
	if home != "" {
		var m homeMarker
		if data, err := os.ReadFile(marker); err == nil && json.Unmarshal(data, &m) == nil && m.Spec == spec {
			b.Logf("reusing the home in %s: %d events, %.1f MB, %d pending messages", home, m.Stats.Events, float64(m.Stats.Bytes)/1e6, m.Stats.Pending)
			return home, m.Stats
		}
		if isTmpfs(filepath.Dir(home)) {
			b.Fatalf("WARREN_BENCH_HOME %s is on a tmpfs; choose a directory on a real disk", home)
		}
		if err := os.RemoveAll(home); err != nil {
			b.Fatalf("clearing WARREN_BENCH_HOME %s: %v", home, err)
		}
	} else {
		home = filepath.Join(benchDir(b), "home")
	}
	t0 := time.Now()
	st, err := genHome(faultfs.OS{}, home, spec)
	if err != nil {
		b.Fatalf("generating the home: %v", err)
	}
	b.Logf("generated %d agents, %d events, %.1f MB, %d pending messages (%.1f MB large) in %v",
		spec.Agents, st.Events, float64(st.Bytes)/1e6, st.Pending, float64(st.PendingBytes)/1e6, time.Since(t0).Round(time.Millisecond))
	if cached {
		data, err := json.Marshal(homeMarker{Spec: spec, Stats: st})
		if err == nil {
			err = os.WriteFile(marker, data, 0o600)
		}
		if err != nil {
			b.Fatalf("writing %s: %v", marker, err)
		}
	}
	return home, st
}

// benchRecover measures recoveries with CoreOptions.CheckpointEvery set to
// every: -1 folds every log from its start (and leaves no checkpoint);
// otherwise an untimed first recovery and stop leave the checkpoints the
// timed ones start from. maxLag > 0 moves each checkpoint back by up to
// maxLag entries before each timed recovery (lagCheckpoints, untimed).
func benchRecover(b *testing.B, home string, spec homeSpec, st homeStats, every, maxLag int) {
	newCore := func(fsys faultfs.FS) (*Core, error) {
		return NewCore(context.Background(), withDefaults(CoreOptions{
			FS: fsys, Home: home, DefaultProvider: "inproc", DefaultModel: "echo",
			Providers: map[string]provider.Provider{"inproc": inproc.New("inproc", inproc.Options{NativeResume: true})},
			Config:    config.Default(), NoWake: true, Logger: hclog.NewNullLogger(), CheckpointEvery: every,
		}))
	}
	b.StopTimer()
	for _, e := range mustReadDir(b, filepath.Join(home, "agents")) {
		_ = os.Remove(filepath.Join(home, "agents", e.Name(), checkpoint.Name))
	}
	if every >= 0 {
		c, err := newCore(faultfs.OS{})
		if err == nil {
			_, err = c.Recover(context.Background())
		}
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Close(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	b.StartTimer()
	var total, cpuTotal time.Duration
	var heap, fsyncs uint64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if maxLag > 0 {
			lagCheckpoints(b, home, int64(i+1), maxLag)
		}
		runtime.GC()
		cfs := newCountingFS(faultfs.OS{})
		b.StartTimer()
		cpu0, start := cpuTime(), time.Now()
		c, err := newCore(cfs)
		if err != nil {
			b.Fatalf("NewCore: %v", err)
		}
		rep, err := c.Recover(context.Background())
		d, cpu := time.Since(start), cpuTime()-cpu0
		b.StopTimer()
		if err != nil {
			b.Fatalf("Recover: %v", err)
		}
		if rep.Agents != spec.Agents || rep.Corrupt != 0 || rep.Orphans != 0 || rep.Pending != st.Pending || rep.Interrupted != 0 {
			b.Fatalf("recovery report %+v; want %d agents, none corrupt, orphaned or interrupted, %d pending", rep, spec.Agents, st.Pending)
		}
		total += d
		cpuTotal += cpu
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		heap = ms.HeapInuse
		if p := os.Getenv("WARREN_BENCH_HEAPPROFILE"); p != "" && i == 0 {
			writeHeapProfile(b, p)
		}
		fsyncs = uint64(cfs.Fsyncs())
		runtime.KeepAlive(c)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := c.Close(ctx); err != nil {
			b.Errorf("Close: %v", err)
		}
		cancel()
		b.StartTimer()
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "s/recovery")
	b.ReportMetric(cpuTotal.Seconds()/float64(b.N), "cpu_s/recovery")
	b.ReportMetric(float64(st.Events)/(total.Seconds()/float64(b.N)), "events/s")
	b.ReportMetric(float64(heap)/(1<<20), "heap_inuse_MB")
	b.ReportMetric(float64(st.Bytes)/(1<<20), "logs_MB")
	b.ReportMetric(float64(fsyncs), "fsyncs/recovery")
}

// genHome writes a home of spec.Agents agents in groups of one root and
// GroupSize-1 children. Each log starts with agent.created and
// session.created, then repeats a nine-event exchange until it holds
// EventsPerAgent events:
//
//	message.enqueued (from the previous group member)
//	turn.start (a wake turn showing it), tool.call send_message (to the
//	next group member, with the envelope), turn.complete
//	message.enqueued (another message from the previous member)
//	turn.start (a user turn), tool.call check_inbox (showing it),
//	message.delivered, turn.complete
//
// and ends with messages still pending when fewer than nine events are
// left. Every message a log records as sent is enqueued in its
// recipient's log, as in a home the daemon wrote. session.json is written
// (without fsync) as the daemon leaves it after a turn.
func genHome(fsys faultfs.FS, home string, spec homeSpec) (homeStats, error) {
	if spec.GroupSize < 2 || spec.Agents%spec.GroupSize != 0 || spec.EventsPerAgent < 2 {
		return homeStats{}, fmt.Errorf("home spec %+v: agents must be a multiple of a group size of at least 2, and each agent needs 2 events", spec)
	}
	agentsDir := filepath.Join(home, "agents")
	if err := fsys.MkdirAll(agentsDir, 0o700); err != nil {
		return homeStats{}, fmt.Errorf("creating %s: %w", agentsDir, err)
	}
	var events, bytes atomic.Int64
	var pending, pendingBytes atomic.Int64
	work := make(chan int)
	errs := make(chan error, spec.Agents)
	var wg sync.WaitGroup
	for w := 0; w < 2*runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				n, sz, pend, err := genAgent(fsys, agentsDir, spec, i)
				if err != nil {
					errs <- err
					continue
				}
				events.Add(int64(n))
				bytes.Add(sz)
				pending.Add(int64(pend))
				if k := spec.bigShare(i); k > 0 {
					pending.Add(int64(k))
					pendingBytes.Add(int64(k) * int64(spec.BigPayload))
				}
			}
		}()
	}
	for i := 0; i < spec.Agents; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return homeStats{}, err
	}
	if err := fsys.SyncDir(agentsDir); err != nil {
		return homeStats{}, err
	}
	return homeStats{Events: events.Load(), Bytes: bytes.Load(), Pending: int(pending.Load()), PendingBytes: pendingBytes.Load()}, nil
}

func genAgentID(i int) string { return fmt.Sprintf("b%031x", i) }

func genMsgID(sender, cycle, tag int) string {
	return fmt.Sprintf("%08x%08x%08x%08x", sender, cycle, tag, 0)
}

// genAgent writes agent i's log and session.json; it returns the number of
// events, the log's size and the number of messages left pending.
func genAgent(fsys faultfs.FS, agentsDir string, spec homeSpec, i int) (int, int64, int, error) {
	g, k := i/spec.GroupSize, i%spec.GroupSize
	member := func(k int) int { return g*spec.GroupSize + (k+spec.GroupSize)%spec.GroupSize }
	prev, next := member(k-1), member(k+1)
	id := genAgentID(i)
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Millisecond)
	now := func() time.Time { clock = clock.Add(time.Millisecond); return clock }
	path := filepath.Join(agentsDir, id, "events.jsonl")
	lg, err := eventlog.Open(fsys, path, eventlog.Options{Now: now})
	if err != nil {
		return 0, 0, 0, err
	}
	name, parent := fmt.Sprintf("w%d", k), new(string)
	*parent = genAgentID(g * spec.GroupSize)
	if k == 0 {
		name, parent = fmt.Sprintf("g%d", g), nil
	}
	handle := fmt.Sprintf("%032x", i+1<<20)
	recs := []eventlog.Record{
		{Event: schema.AgentCreated, Data: schema.AgentCreatedData{AgentID: id, Name: name, ParentID: parent,
			Instructions: "You are worker " + name + ". Split the work you get, delegate to your children and report back to your parent.",
			Provider:     "inproc", Model: "echo", Metadata: map[string]string{"team": fmt.Sprintf("g%d", g)}}},
		{Event: schema.SessionCreated, Data: schema.SessionCreatedData{Provider: "inproc", Model: "echo", Handle: handle}},
	}
	msg := func(from, to, cycle, tag int) inbox.Message {
		return inbox.Message{ID: genMsgID(from, cycle, tag), Sender: genAgentID(from), Recipient: genAgentID(to),
			Kind: inbox.KindRequest, Timestamp: clock, Metadata: map[string]string{},
			Payload: fmt.Sprintf("Step %d: check the results of batch %d and send me a short summary of what changed.", cycle, tag)}
	}
	pad := padText("The change log, line by line, as the model wrote it. ", spec.ResponsePad)
	bootID := fmt.Sprintf("%032x", 0xb007)
	turn := 0
	startTurn := func(prompt string, ids []string) string {
		turn++
		run := fmt.Sprintf("%08x%08x%016x", i, turn, 0)
		recs = append(recs, eventlog.Record{Event: schema.TurnStart, Data: schema.TurnStartData{RunID: run, Turn: turn, BootID: bootID,
			Prompt: prompt, Provider: "inproc", Model: "echo", MessageIDs: ids}})
		return run
	}
	complete := func(run string) {
		recs = append(recs, eventlog.Record{Event: schema.TurnComplete, Data: schema.TurnCompleteData{RunID: run, Turn: turn,
			Response: "Done. I compared the batch with the previous one: three files changed, the tests pass, and the summary is sent. " + strings.Repeat("ok ", 20) + pad}})
	}
	cycle := 0
	for len(recs)+9 <= spec.EventsPerAgent {
		in := msg(prev, i, cycle, 1)
		recs = append(recs, eventlog.Record{Event: schema.MessageEnqueued, Data: in.EventData()})
		run := startTurn(inbox.FormatPrompt([]inbox.Message{in}, func(string) string { return "w" }), []string{in.ID})
		out := msg(i, next, cycle, 1)
		recs = append(recs, eventlog.Record{Event: schema.ToolCall, Data: schema.ToolCallData{CallID: genMsgID(i, cycle, 3), Tool: "send_message",
			Args:   map[string]any{"recipient": fmt.Sprintf("w%d", (k+1)%spec.GroupSize), "text": out.Payload},
			Result: map[string]any{"status": "sent", "message_id": out.ID}, RunID: run, Turn: turn,
			Messages: []map[string]any{out.EventData()}}})
		complete(run)
		in2 := msg(prev, i, cycle, 2)
		recs = append(recs, eventlog.Record{Event: schema.MessageEnqueued, Data: in2.EventData()})
		run = startTurn("Check your inbox and carry on with the plan.", nil)
		recs = append(recs, eventlog.Record{Event: schema.ToolCall, Data: schema.ToolCallData{CallID: genMsgID(i, cycle, 4), Tool: "check_inbox",
			Args:   map[string]any{},
			Result: map[string]any{"messages": []any{map[string]any{"from": "w", "text": in2.Payload, "message_id": in2.ID}}}, RunID: run, Turn: turn}})
		recs = append(recs, eventlog.Record{Event: schema.MessageDelivered, Data: schema.MessageDeliveredData{MessageID: in2.ID}})
		complete(run)
		cycle++
	}
	pend := 0
	for len(recs) < spec.EventsPerAgent {
		if spec.NoPendingFill {
			v := fmt.Sprintf("step %d", len(recs))
			recs = append(recs, eventlog.Record{Event: schema.MetadataUpdated, Data: schema.MetadataUpdatedData{Key: "progress", Value: &v}})
			continue
		}
		m := msg(prev, i, cycle, 5+pend)
		recs = append(recs, eventlog.Record{Event: schema.MessageEnqueued, Data: m.EventData()})
		pend++
	}
	if k := spec.bigShare(i); k > 0 {
		recs = append(recs, eventlog.Record{Event: schema.ToolGate, Data: schema.GateData{Action: "gate", AgentName: name}})
		big := padText("A large attachment, kept pending while its recipient is gated. ", spec.BigPayload)
		for j := 0; j < k; j++ {
			m := msg(prev, i, cycle+1, 100+j)
			m.Payload = big
			recs = append(recs, eventlog.Record{Event: schema.MessageEnqueued, Data: m.EventData()})
		}
	}
	total := len(recs)
	// Large batches: one write and one fsync each.
	for len(recs) > 0 {
		n, size := 0, 0
		for n < len(recs) && n < 500 && size < 8<<20 {
			if m, ok := recs[n].Data.(map[string]any); ok {
				if p, ok := m["payload"].(string); ok {
					size += len(p)
				}
			}
			size += 512
			n++
		}
		if _, err := lg.AppendBatch(recs[:n]); err != nil {
			_ = lg.Close()
			return 0, 0, 0, err
		}
		recs = recs[n:]
	}
	if err := lg.Close(); err != nil {
		return 0, 0, 0, err
	}
	fi, err := fsys.Stat(path)
	if err != nil {
		return 0, 0, 0, err
	}
	sess := session.Session{ID: id, State: session.StateIdle, Provider: "inproc", Model: "echo", Handle: handle,
		CreatedAt: clock, UpdatedAt: clock, Run: nil}
	data, err := json.MarshalIndent(sess, "", "  ")
	if err != nil {
		return 0, 0, 0, err
	}
	if err := faultfs.WriteFile(fsys, filepath.Join(agentsDir, id, session.FileName), append(data, '\n'), 0o600); err != nil {
		return 0, 0, 0, err
	}
	return total, fi.Size(), pend, nil
}

// padText repeats s to exactly n bytes.
func padText(s string, n int) string { return strings.Repeat(s, n/len(s)+1)[:n] }

// TestGenHomeIsWhatRecoveryExpects checks the generator on a small home in
// memory: every agent is recovered, none is corrupt or interrupted, and the
// pending messages are exactly those the generator left undelivered.
func TestGenHomeIsWhatRecoveryExpects(t *testing.T) {
	fsys := faultfs.NewMem()
	spec := homeSpec{Agents: 6, EventsPerAgent: 50, GroupSize: 3}
	st, err := genHome(fsys, "/home", spec)
	if err != nil {
		t.Fatalf("genHome: %v", err)
	}
	if st.Events != 300 || st.Pending != 6*((50-2)%9) {
		t.Fatalf("stats %+v; want 300 events and %d pending", st, 6*((50-2)%9))
	}
	// No checkpoints: recovery writes them for every log it folds, and
	// this compares the agent files the generator wrote.
	c, err := NewCore(context.Background(), withDefaults(CoreOptions{FS: fsys, Home: "/home", NoWake: true, CheckpointEvery: -1,
		Providers: map[string]provider.Provider{"inproc": inproc.New("inproc", inproc.Options{NativeResume: true})}}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	before := snapshotDir(t, fsys, "/home/agents")
	rep, err := c.Recover(context.Background())
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	if rep.Agents != 6 || rep.Corrupt != 0 || rep.Orphans != 0 || rep.Interrupted != 0 || rep.Pending != st.Pending {
		t.Fatalf("report %+v, want 6 agents, %d pending, nothing corrupt, orphaned or interrupted", rep, st.Pending)
	}
	for _, v := range c.List() {
		if v.Status != "idle" {
			t.Errorf("agent %s (%s) is %s, want idle", v.Name, v.Path, v.Status)
		}
	}
	if got := len(c.tree.Roots()); got != 2 {
		t.Fatalf("%d roots, want 2", got)
	}
	if after := snapshotDir(t, fsys, "/home/agents"); fmtAny(after) != fmtAny(before) {
		t.Fatalf("recovering a generated home changed its agent files; the generator must write a complete, consistent home")
	}
}

func mustReadDir(b testing.TB, dir string) []os.DirEntry {
	es, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	return es
}

// writeHeapProfile writes the heap profile (after a GC) to path.
func writeHeapProfile(b *testing.B, path string) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatalf("heap profile: %v", err)
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		b.Fatalf("heap profile: %v", err)
	}
}

// snapshotDir maps every file under dir to its content.
func snapshotDir(t *testing.T, fsys faultfs.FS, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	es, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatalf("listing %s: %v", dir, err)
	}
	for _, e := range es {
		p := filepath.Join(dir, e.Name())
		if e.IsDir() {
			for k, v := range snapshotDir(t, fsys, p) {
				out[k] = v
			}
			continue
		}
		data, err := faultfs.ReadFile(fsys, p)
		if err != nil {
			t.Fatalf("reading %s: %v", p, err)
		}
		out[p] = string(data)
	}
	return out
}
