package console

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warren-dev/warren/protocol"
	"github.com/warren-dev/warren/server"
)

// burstHandler streams n turn.complete events on events.subscribe.
type burstHandler struct{ n int }

func (h burstHandler) Handle(ctx context.Context, req *protocol.Request, out server.Stream) (any, error) {
	_ = out.Event(map[string]any{"event": "subscribed"})
	for i := range h.n {
		ev := map[string]any{"event": "turn.complete", "agent_id": "9fedc8251a8d9b2d915d3e1108fc3a28", "seq": int64(i + 1),
			"ts": "2026-11-29T10:01:10.123Z", "data": map[string]any{"run_id": "d1d7eb3204ff97e8cf48e8c38650d0c3", "turn": int64(i),
				"response": "Done: the tests pass and the branch is pushed.", "usage": map[string]any{"input_tokens": int64(1200), "output_tokens": int64(80)}}}
		if err := out.Event(ev); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkEventStream measures the console's own cost per event: the
// frame encoded, written as a server-sent event and flushed to a real
// HTTP connection, the reading client in the same process (so the CPU
// figure is an upper bound):
//
//	go test -run '^$' -bench EventStream ./console/
func BenchmarkEventStream(b *testing.B) {
	c, _, srv, _, _ := newTest(b)
	c.opts.Handler = burstHandler{n: b.N}
	code, _, _ := c.Pair()
	res, err := noRedirect.Get(srv.URL + "/pair?code=" + code)
	if err != nil {
		b.Fatal(err)
	}
	ck := res.Cookies()[0]
	req, _ := http.NewRequest("GET", srv.URL+"/api/events", nil)
	req.AddCookie(ck)
	start := cpuNow()
	b.ResetTimer()
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	sc := bufio.NewScanner(res.Body)
	n := 0
	for n <= b.N && sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data: ") {
			n++
		}
	}
	b.StopTimer()
	res.Body.Close()
	srv.Close()
	b.ReportMetric(float64((cpuNow()-start).Nanoseconds())/float64(b.N)/1000, "cpu-µs/event")
}
