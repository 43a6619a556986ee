package engine

// Heap held by large pending messages (issue 16, "memory bounded by
// design"): measured, not asserted. Run with
//
//	go test -run '^$' -bench BenchmarkPendingHeap -benchtime 1x ./engine/
//
// WARREN_BENCH_PENDING_MB sets the pending volume (default 256 messages of
// 1 MiB). Metrics: pending-MB (payload bytes pending), heap-MB-live (heap
// in use after a GC with every message pending), heap-MB-recovered (the
// same after a restart and recovery), peak-heap-MB-recovery (highest heap
// sampled every 2 ms during recovery), heap-MB-inspect (heap after a GC
// while holding one agent.inspect reply). Every figure is the heap above
// the one before the first core was built.

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/config"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/inproc"
)

func heapMB() float64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapAlloc) / (1 << 20)
}

// samplePeak samples HeapAlloc until stop is called and returns the
// highest value seen, in MB.
func samplePeak() (stop func() float64) {
	var peak atomic.Uint64
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() float64 {
		close(done)
		<-finished
		return float64(peak.Load()) / (1 << 20)
	}
}

func BenchmarkPendingHeap(b *testing.B) {
	n := 256
	if v, err := strconv.Atoi(os.Getenv("WARREN_BENCH_PENDING_MB")); err == nil && v > 0 {
		n = v
	}
	const kids = 8
	payload := strings.Repeat("m", 1<<20)
	for i := 0; i < b.N; i++ {
		home := benchDir(b)
		newCore := func() *Core {
			cfg := config.Default()
			cfg.Limits.InboxMessages = n + 1
			c, err := NewCore(context.Background(), withDefaults(CoreOptions{
				FS: faultfs.OS{}, Home: home, Providers: map[string]provider.Provider{"inproc": inproc.New("inproc", inproc.Options{})},
				DefaultProvider: "inproc", DefaultModel: "echo", Config: cfg, NoWake: true, Logger: hclog.NewNullLogger(),
			}))
			if err != nil {
				b.Fatal(err)
			}
			return c
		}
		closeCore := func(c *Core) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := c.Close(ctx); err != nil {
				b.Fatal(err)
			}
		}
		base := heapMB()
		c := newCore()
		if _, err := c.Recover(context.Background()); err != nil {
			b.Fatal(err)
		}
		root := benchAgents(b, c, 1, "root", "", "echo")[0]
		benchAgents(b, c, kids, "kid", root, "echo")
		for j := 0; j < n; j++ {
			res, err := c.CallTool(context.Background(), root, "send_message", map[string]any{"recipient": fmt.Sprint("kid", j%kids), "text": payload})
			if err != nil || res["error"] != nil {
				b.Fatalf("send %d: %v %v", j, err, res)
			}
		}
		live := heapMB() - base
		kid0, _ := c.Resolve("kid0")
		insp, err := c.Inspect(context.Background(), kid0)
		if err != nil {
			b.Fatal(err)
		}
		inspectMB := heapMB() - base
		runtime.KeepAlive(insp)
		insp = AgentDetail{}
		closeCore(c)
		c = nil
		// base stays the heap before the first core: anything the closed
		// core still held would count below.
		stop := samplePeak()
		c2 := newCore()
		if _, err := c2.Recover(context.Background()); err != nil {
			b.Fatal(err)
		}
		peak := stop() - base
		recovered := heapMB() - base
		closeCore(c2)
		b.ReportMetric(float64(n), "pending-MB")
		b.ReportMetric(live, "heap-MB-live")
		b.ReportMetric(inspectMB, "heap-MB-inspect")
		b.ReportMetric(recovered, "heap-MB-recovered")
		b.ReportMetric(peak, "peak-heap-MB-recovery")
	}
}
