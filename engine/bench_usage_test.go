package engine

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/inproc"
)

// BenchmarkTurnUsageStep measures what accounting adds to a turn: an
// inproc turn of three model requests (inproc.Turn.Request: the budget
// check and a usage.step entry each) against the same turn without
// requests, interleaved in one run, on a real disk (fsync):
//
//	go test -run '^$' -bench TurnUsageStep -benchtime 300x ./engine/
func BenchmarkTurnUsageStep(b *testing.B) {
	prov := inproc.New("inproc", inproc.Options{})
	prov.Register("plain", func(context.Context, *inproc.Turn) (string, error) { return "done", nil })
	prov.Register("three", func(_ context.Context, t *inproc.Turn) (string, error) {
		for range 3 {
			if err := t.Request(provider.Usage{InputTokens: 1200, OutputTokens: 80, CachedInputTokens: 900}); err != nil {
				return "", err
			}
		}
		return "done", nil
	})
	c := benchCore(b, benchDir(b), faultfs.OS{}, prov, 4, true)
	ctx := context.Background()
	plain, err := c.CreateAgent(ctx, CreateSpec{Name: "plain", Provider: "inproc", Model: "plain"})
	if err != nil {
		b.Fatal(err)
	}
	three, err := c.CreateAgent(ctx, CreateSpec{Name: "three", Provider: "inproc", Model: "three"})
	if err != nil {
		b.Fatal(err)
	}
	lat := map[string][]time.Duration{}
	for b.Loop() {
		for _, id := range []string{plain, three} {
			start := time.Now()
			if res, err := c.Send(ctx, id, "go", "", "", nil); err != nil || res.Err != nil {
				b.Fatal(err, res.Err)
			}
			lat[id] = append(lat[id], time.Since(start))
		}
	}
	for id, name := range map[string]string{plain: "without", three: "with-3-requests"} {
		l := lat[id]
		slices.Sort(l)
		b.ReportMetric(float64(l[len(l)/2].Microseconds())/1000, name+"-p50-ms")
	}
}
