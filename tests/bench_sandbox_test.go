package tests

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// BenchmarkSandbox measures what a sandbox costs a scripted agent, the
// two kinds interleaved in one run: the start (agent.send to a new agent:
// its process started, the first turn answered) and a turn of the live
// process (the second agent.send), p50 of each:
//
//	go test -run '^$' -bench Sandbox -benchtime 40x ./tests/
func BenchmarkSandbox(b *testing.B) {
	d := startTestDaemon(b, modeBinary)
	script := writeScripts(b, d.dir)
	lat := map[string][]time.Duration{}
	timed := func(key, id, msg string) {
		start := time.Now()
		d.callN("agent.send", map[string]any{"agent_id": id, "message": msg})
		lat[key] = append(lat[key], time.Since(start))
	}
	n := 0
	for b.Loop() {
		for _, boxed := range []bool{false, true} {
			kind := "plain"
			if boxed {
				kind = "sandboxed"
			}
			n++
			b.StopTimer()
			id := d.callN("agent.create", map[string]any{"name": fmt.Sprintf("a%d", n), "provider": "scripted", "model": script,
				"sandbox": boxed})["agent_id"].(string)
			b.StartTimer()
			timed(kind+"-start", id, "hello")
			timed(kind+"-turn", id, "again")
			b.StopTimer()
			d.callN("agent.terminate", map[string]any{"agent_id": id})
			b.StartTimer()
		}
	}
	for key, l := range lat {
		slices.Sort(l)
		b.ReportMetric(float64(l[len(l)/2].Microseconds())/1000, key+"-p50-ms")
	}
}
