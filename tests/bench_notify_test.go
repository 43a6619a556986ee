package tests

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// BenchmarkNotifyHangingSink measures what a notification sink that never
// answers costs a turn: two daemons, one with a webhook whose server
// hangs every request and one without sinks, each turn of a scripted root
// sending USER a message (a notification each), interleaved in one run:
//
//	go test -run '^$' -bench NotifyHangingSink -benchtime 200x ./tests/
func BenchmarkNotifyHangingSink(b *testing.B) {
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(hang)
	with := newTestDaemon(b, modeBinary)
	writeFile(b, filepath.Join(with.Home, "config.json"), mustJSON(b, map[string]any{"notify": []any{
		map[string]any{"type": "webhook", "url": srv.URL}}}))
	with.Start()
	without := startTestDaemon(b, modeBinary)
	ids := map[*testDaemon]string{}
	for _, d := range []*testDaemon{with, without} {
		ids[d] = d.createAgent("lead", "scripted", writeScripts(b, d.dir), "")
		d.callN("agent.send", map[string]any{"agent_id": ids[d], "message": "warm up"})
	}
	lat := map[*testDaemon][]time.Duration{}
	for b.Loop() {
		for _, d := range []*testDaemon{with, without} {
			start := time.Now()
			d.callN("agent.send", map[string]any{"agent_id": ids[d], "message": "send USER progress"})
			lat[d] = append(lat[d], time.Since(start))
		}
	}
	for d, name := range map[*testDaemon]string{with: "hanging-sink", without: "no-sink"} {
		l := lat[d]
		slices.Sort(l)
		b.ReportMetric(float64(l[len(l)/2].Microseconds())/1000, name+"-p50-ms")
		b.ReportMetric(float64(l[len(l)*9/10].Microseconds())/1000, name+"-p90-ms")
	}
	st := with.callN("daemon.status", nil)["notify"].(map[string]any)
	b.Logf("the hanging sink: %v", st)
}
