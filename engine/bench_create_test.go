package engine

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/store"
)

// BenchmarkCreate is agent creates per second from 1 and 8 concurrent
// clients, on the daemon's store (the logs' fsyncs shared through a
// Syncer) and, for comparison, with every log fsyncing its own files, on
// the repository's disk. Metrics: creates/s, flushes per create (fsyncs of
// files and directories and syncfs calls, background writes included) and
// the raw fsync's median beside it. The pool has room for every session,
// so no create evicts another (an eviction costs a suspend.result entry and
// a durable session.json, as BenchmarkTurn's evict_restore shows).
func BenchmarkCreate(b *testing.B) {
	for _, shared := range []bool{true, false} {
		for _, clients := range []int{1, 8} {
			name := fmt.Sprintf("store=daemon/clients=%d", clients)
			if !shared {
				name = fmt.Sprintf("store=per-file/clients=%d", clients)
			}
			b.Run(name, func(b *testing.B) { benchCreates(b, clients, shared) })
		}
	}
}

func benchCreates(b *testing.B, clients int, shared bool) {
	dir := benchDir(b)
	fsyncMed, _ := fsyncP50(b, dir, 300)
	cfs := newCountingFS(faultfs.OS{})
	var st store.Store
	if shared {
		st = daemonStore(cfs, dir+"/home")
	}
	c := benchCoreOn(b, dir+"/home", cfs, st, inproc.New("inproc", inproc.Options{NativeResume: true}), 1<<20, true)
	ctx := context.Background()
	before, kindsBefore := cfs.Fsyncs(), cfs.Kinds()
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for w := 0; w < clients; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := next.Add(1); n <= int64(b.N); n = next.Add(1) {
				if _, err := c.CreateAgent(ctx, CreateSpec{Name: fmt.Sprintf("a%d", n), Provider: "inproc", Model: "echo"}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "creates/s")
	b.ReportMetric(float64(cfs.Fsyncs()-before)/float64(b.N), "flushes/create")
	reportKinds(b, kindsBefore, cfs.Kinds(), b.N, "create")
	b.ReportMetric(ms(fsyncMed), "fsync_p50_ms")
}
