package tests

import (
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/warren-dev/warren/protocol"
)

// benchAgents is how many echo agents the benchmark daemon holds: one per
// concurrent client, so agent.send never finds its agent mid-turn.
const benchAgents = 32

// BenchmarkSocket measures requests per second and p50/p99 latency of
// agent.list (on a daemon with 1 agent, then 32) and agent.send (inproc
// "echo", one agent per client) over the daemon's socket, with 1 and 32
// concurrent clients, for both framings:
//
//	go test -run '^$' -bench Socket ./tests/
//
// Each msgpack client keeps one connection and one request in flight; each
// JSON request is a connection of its own (Substrat's model). The daemon is
// the built binary; WARREN_BENCH_INPROC=1 runs it in this process instead,
// so -cpuprofile covers both sides.
func BenchmarkSocket(b *testing.B) {
	mode := modeBinary
	if os.Getenv("WARREN_BENCH_INPROC") == "1" {
		mode = modeInProcess
	}
	d := startTestDaemon(b, mode)
	run := func(name, method string) {
		for _, fr := range []string{"msgpack", "json"} {
			for _, clients := range []int{1, 32} {
				b.Run(fmt.Sprintf("%s/%s/clients=%d", name, fr, clients), func(b *testing.B) {
					benchSocket(b, d.Sock, method, fr, clients)
				})
			}
		}
	}
	// agent.list's cost grows with the tree: measure it with 1 agent and
	// with the 32 the agent.send benchmarks need.
	d.createAgent("b0", "inproc", "echo", "")
	d.dropClient()
	run("agent.list/agents=1", "agent.list")
	for i := 1; i < benchAgents; i++ {
		d.createAgent(fmt.Sprintf("b%d", i), "inproc", "echo", "")
	}
	d.dropClient()
	run(fmt.Sprintf("agent.list/agents=%d", benchAgents), "agent.list")
	run("agent.send", "agent.send")
}

func benchSocket(b *testing.B, sock, method, fr string, clients int) {
	ctx := context.Background()
	calls := make([]rpcFunc, clients)
	for i := range calls {
		switch fr {
		case "msgpack":
			cl, err := protocol.Dial(ctx, sock)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { cl.Close() })
			calls[i] = cl.Call
		default:
			calls[i] = func(ctx context.Context, m string, p map[string]any) (map[string]any, error) {
				return protocol.CallJSON(ctx, sock, m, p)
			}
		}
	}
	lat := make([][]time.Duration, clients)
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for c := 0; c < clients; c++ {
		n := b.N / clients
		if c < b.N%clients {
			n++
		}
		wg.Add(1)
		go func(c, n int) {
			defer wg.Done()
			params := map[string]any{}
			if method == "agent.send" {
				params = map[string]any{"agent_id": fmt.Sprintf("b%d", c), "message": "hi"}
			}
			own := make([]time.Duration, 0, n)
			for i := 0; i < n; i++ {
				t0 := time.Now()
				if _, err := calls[c](ctx, method, params); err != nil {
					errs <- fmt.Errorf("client %d: %s: %w", c, method, err)
					return
				}
				own = append(own, time.Since(t0))
			}
			lat[c] = own
		}(c, n)
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	if len(all) == 0 {
		return
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	pct := func(p float64) float64 {
		return float64(all[int(p*float64(len(all)-1))].Nanoseconds()) / 1e3
	}
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "req/s")
	b.ReportMetric(pct(0.50), "p50_us")
	b.ReportMetric(pct(0.99), "p99_us")
}
