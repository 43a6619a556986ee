package engine

// Turn-path benchmarks (issue 3): Core.Send with the inproc "echo" program
// on the real disk, for 1 and 64 agents (one concurrent sender per agent)
// and pool sizes 4 and 64, and the evict+restore cost with a single slot.
//
//	go test -run '^$' -bench 'BenchmarkTurn' -benchtime 2s ./engine/
//
// Each reports turns/s, the p50 and p99 latency of Send, the fsyncs a turn
// performs (file syncs plus directory syncs, counted by a wrapping FS), the
// p50 of a raw append+fsync on the same disk measured in the same run, and
// ratio = turn p50 / (fsyncs per turn x fsync p50), and the process CPU
// time per turn. The target is a ratio of at most 1.5.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/store"
)

func BenchmarkTurn(b *testing.B) {
	for _, agents := range []int{1, 64} {
		for _, pool := range []int{4, 64} {
			b.Run(fmt.Sprintf("agents=%d/pool=%d", agents, pool), func(b *testing.B) {
				benchTurns(b, agents, pool, false, 0, false)
			})
		}
	}
	// On the daemon's store: the logs' fsyncs shared through a Syncer.
	for _, agents := range []int{1, 64} {
		b.Run(fmt.Sprintf("store=daemon/agents=%d/pool=%d", agents, agents), func(b *testing.B) {
			benchTurns(b, agents, agents, false, 0, true)
		})
	}
	// One slot, two agents taking turns: every turn evicts the other
	// agent's session (suspend.result, session.json) and restores its own.
	b.Run("evict_restore/agents=2/pool=1", func(b *testing.B) {
		benchTurns(b, 2, 1, true, 0, false)
	})
	// The same with logs that already hold 5,000 events each: a restore
	// costs more when the log is longer if it reads the whole log.
	b.Run("evict_restore/agents=2/pool=1/log=5000", func(b *testing.B) {
		benchTurns(b, 2, 1, true, 5000, false)
	})
}

// benchTurns runs b.N turns spread over agents. Concurrent: one sender
// goroutine per agent. Alternate: one sender, agents in round robin.
// preload > 0 starts from a generated home whose agents (one root and its
// children) already have that many events each. shared runs the core
// on the store the daemon opens (a Syncer shared by the logs).
func benchTurns(b *testing.B, agents, pool int, alternate bool, preload int, shared bool) {
	dir := benchDir(b)
	fsyncMed, _ := fsyncP50(b, dir, 300)
	cfs := newCountingFS(faultfs.OS{})
	prov := inproc.New("inproc", inproc.Options{NativeResume: true})
	var ids []string
	if preload > 0 {
		if _, err := genHome(faultfs.OS{}, dir+"/home", homeSpec{Agents: agents, EventsPerAgent: preload, GroupSize: agents}); err != nil {
			b.Fatalf("generating the home: %v", err)
		}
		for i := 0; i < agents; i++ {
			ids = append(ids, genAgentID(i))
		}
	}
	var st store.Store
	if shared {
		st = daemonStore(cfs, dir+"/home")
	}
	c := benchCoreOn(b, dir+"/home", cfs, st, prov, pool, true)
	if preload == 0 {
		ids = benchAgents(b, c, agents, "a", "", "echo")
	}
	ctx := context.Background()
	send := func(id string) time.Duration {
		t0 := time.Now()
		res, err := c.Send(ctx, id, "hello", "", "", nil)
		d := time.Since(t0)
		// The first turn of a session rebuilt from the log carries the
		// history block around the message.
		if err != nil || res.Err != nil || !strings.HasPrefix(res.Response, "echo: ") || !strings.Contains(res.Response, "hello") {
			b.Errorf("Send to %s: response %.200q, turn error %v, error %v; want the echo response", id, res.Response, res.Err, err)
		}
		return d
	}
	for _, id := range ids { // warm-up: every session has run one turn
		send(id)
	}
	evictsBefore := countEvents(b, c, ids, schema.SuspendResult)
	syncsBefore, kindsBefore := cfs.Fsyncs(), cfs.Kinds()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	cpu0, start := cpuTime(), time.Now()
	if alternate {
		for i := 0; i < b.N; i++ {
			lat = append(lat, send(ids[i%len(ids)]))
		}
	} else {
		var next atomic.Int64
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, id := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var mine []time.Duration
				for next.Add(1) <= int64(b.N) {
					mine = append(mine, send(id))
				}
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			}()
		}
		wg.Wait()
	}
	elapsed, cpu := time.Since(start), cpuTime()-cpu0
	b.StopTimer()
	fsyncs := float64(cfs.Fsyncs()-syncsBefore) / float64(b.N)
	evicts := float64(countEvents(b, c, ids, schema.SuspendResult)-evictsBefore) / float64(b.N)
	p50, p99 := percentile(lat, 50), percentile(lat, 99)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "turns/s")
	b.ReportMetric(ms(p50), "p50_ms")
	b.ReportMetric(ms(p99), "p99_ms")
	b.ReportMetric(fsyncs, "fsyncs/turn")
	reportKinds(b, kindsBefore, cfs.Kinds(), b.N, "turn")
	b.ReportMetric(evicts, "evictions/turn")
	b.ReportMetric(ms(fsyncMed), "fsync_p50_ms")
	b.ReportMetric(ms(cpu)/float64(b.N), "cpu_ms/turn")
	if need := fsyncs * float64(fsyncMed); need > 0 {
		b.ReportMetric(float64(p50)/need, "ratio")
	}
}

// countEvents counts an event in the logs of ids.
func countEvents(b *testing.B, c *Core, ids []string, event string) int {
	b.Helper()
	n := 0
	for _, id := range ids {
		es, err := c.Log(context.Background(), id, 0)
		if err != nil {
			b.Fatalf("reading the log of %s: %v", id, err)
		}
		for _, e := range es {
			if e.Event == event {
				n++
			}
		}
	}
	return n
}
