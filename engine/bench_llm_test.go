package engine

// Turns through the openai HTTP provider against the fake server on
// loopback, on the real disk: 1 and 64 agents (one concurrent sender per
// agent, pool 64), plain turns and turns with one tool step.
//
//	go test -run '^$' -bench 'BenchmarkLLMTurn' -benchtime 2s ./engine/
//
// Reports turns/s, the p50 and p99 latency of Send and the process CPU per
// turn (daemon, provider and the in-process fake server together); with one
// agent also the p50 and p99 of the daemon's overhead: Send's latency minus
// the time the fake spent answering (the turn's fsyncs are in it).

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/config"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/llmfake"
)

func BenchmarkLLMTurn(b *testing.B) {
	for _, agents := range []int{1, 64} {
		for _, tool := range []bool{false, true} {
			b.Run(fmt.Sprintf("agents=%d/tool_step=%v", agents, tool), func(b *testing.B) {
				benchLLMTurns(b, agents, tool)
			})
		}
	}
}

func benchLLMTurns(b *testing.B, agents int, tool bool) {
	f := llmfake.New(llmfake.OpenAI)
	defer f.Close()
	f.Respond(func(r llmfake.Request) llmfake.Reply {
		if tool && r.Last().Role != "tool" {
			return llmfake.Reply{Calls: []llmfake.Call{{ID: "c1", Name: "list_children", Args: `{}`}}}
		}
		return llmfake.Reply{Text: "a short answer of a few tokens", Chunk: 6}
	})
	data, _ := json.Marshal(map[string]any{"pools": map[string]any{"default": 64},
		"providers": map[string]any{"openai": map[string]any{"base_url": f.BaseURL(), "model": "m", "api_key_env": "K"}}})
	cfg, err := config.Parse(data)
	if err != nil {
		b.Fatal(err)
	}
	dir := benchDir(b)
	c, err := NewCore(context.Background(), withDefaults(CoreOptions{FS: faultfs.OS{}, Home: dir + "/home", Providers: map[string]provider.Provider{},
		Config: cfg, NoWake: true, Logger: hclog.NewNullLogger(), Getenv: func(string) string { return "k" }}))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := c.Recover(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	}()
	ids := make([]string, agents)
	for i := range ids {
		if ids[i], err = c.CreateAgent(context.Background(), CreateSpec{Name: fmt.Sprintf("a%d", i), Provider: "openai"}); err != nil {
			b.Fatal(err)
		}
	}
	var overhead []time.Duration // 1 agent: latency minus the fake's own time
	send := func(id string) time.Duration {
		busy0 := f.Busy()
		t0 := time.Now()
		res, err := c.Send(context.Background(), id, "hello", "", "", nil)
		if err != nil || res.Err != nil {
			b.Errorf("send: %v %v", err, res.Err)
		}
		d := time.Since(t0)
		if agents == 1 {
			overhead = append(overhead, d-(f.Busy()-busy0))
		}
		return d
	}
	for _, id := range ids {
		send(id)
	}
	overhead = overhead[:0]
	var next atomic.Int64
	var mu sync.Mutex
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	cpu0, start := cpuTime(), time.Now()
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
	elapsed, cpu := time.Since(start), cpuTime()-cpu0
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "turns/s")
	b.ReportMetric(ms(percentile(lat, 50)), "p50_ms")
	b.ReportMetric(ms(percentile(lat, 99)), "p99_ms")
	b.ReportMetric(ms(cpu)/float64(b.N), "cpu_ms/turn")
	if len(overhead) > 0 {
		b.ReportMetric(ms(percentile(overhead, 50)), "overhead_p50_ms")
		b.ReportMetric(ms(percentile(overhead, 99)), "overhead_p99_ms")
	}
}
