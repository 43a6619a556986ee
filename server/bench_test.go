package server

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warren-dev/warren/protocol"
)

// BenchmarkTrivialMethod measures a trivial method over the real socket:
// requests per second and p50/p99 latency, for both framings, with 1 and 32
// concurrent clients. JSON opens one connection per request (the Substrat
// framing); native clients keep one connection each.
func BenchmarkTrivialMethod(b *testing.B) {
	for _, framing := range []string{"json", "native"} {
		for _, clients := range []int{1, 32} {
			b.Run(fmt.Sprintf("%s/clients=%d", framing, clients), func(b *testing.B) {
				benchTrivial(b, framing, clients)
			})
		}
	}
}

func benchTrivial(b *testing.B, framing string, clients int) {
	ts := startServer(b, func(c *Config) { c.MaxConns = 1024 })
	ctx := context.Background()
	call := make([]func() error, clients)
	for i := range call {
		if framing == "json" {
			call[i] = func() error {
				_, err := protocol.CallJSON(ctx, ts.path, "trivial", nil)
				return err
			}
			continue
		}
		c := dialClient(b, ts.path)
		call[i] = func() error {
			_, err := c.Call(ctx, "trivial", nil)
			return err
		}
	}
	var next atomic.Int64
	lat := make([][]time.Duration, clients)
	var wg sync.WaitGroup
	var failed atomic.Value
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				if err := call[i](); err != nil {
					failed.Store(err)
					return
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		}(i)
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	pct := func(p float64) float64 {
		return float64(all[min(len(all)-1, int(p*float64(len(all))))].Microseconds())
	}
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "req/s")
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
}
