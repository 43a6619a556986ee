package daemon

// Message-path benchmark (issue 4): a fan-out from one root to 100 children
// and back, through send_message, wake and turn, on the real disk with the
// inproc provider.
//
//	go test -run '^$' -bench 'BenchmarkFanOut' -benchtime 5x ./daemon/
//
// One iteration is one round: the root's turn sends a message to each of
// the 100 children with send_message; every child's wake turn replies to
// the root with send_message; the round ends when the root's wake turns
// have completed (consumed) all 100 replies. A round delivers 200 messages;
// msgs/s counts them. fsyncs/msg counts file and directory syncs.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider/inproc"
)

const fanOutChildren = 100

func BenchmarkFanOut(b *testing.B) {
	for _, pool := range []int{4, 128} {
		b.Run(fmt.Sprintf("children=%d/pool=%d", fanOutChildren, pool), func(b *testing.B) {
			benchFanOut(b, pool)
		})
	}
}

func benchFanOut(b *testing.B, pool int) {
	dir := benchDir(b)
	fsyncMed, _ := fsyncP50(b, dir, 300)
	cfs := newCountingFS(faultfs.OS{})
	prov := inproc.New("inproc", inproc.Options{NativeResume: true})
	prov.Register("fanout-root", func(ctx context.Context, t *inproc.Turn) (string, error) {
		if strings.HasPrefix(t.Prompt, "Message from") {
			return "noted", nil // a wake turn consuming replies
		}
		for i := 0; i < fanOutChildren; i++ {
			res, err := t.Call("send_message", map[string]any{"recipient": fmt.Sprintf("c%d", i), "text": "task " + t.Prompt})
			if err != nil {
				return "", err
			}
			if res["error"] != nil {
				return "", fmt.Errorf("send_message to c%d: %v", i, res["error"])
			}
		}
		return "sent", nil
	})
	prov.Register("fanout-child", func(ctx context.Context, t *inproc.Turn) (string, error) {
		res, err := t.Call("send_message", map[string]any{"recipient": "root", "text": "done"})
		if err != nil {
			return "", err
		}
		if res["error"] != nil {
			return "", fmt.Errorf("send_message to root: %v", res["error"])
		}
		return "replied", nil
	})
	c := benchCore(b, dir+"/home", cfs, prov, pool, false)
	root, err := c.CreateAgent(context.Background(), CreateSpec{Name: "root", Provider: "inproc", Model: "fanout-root"})
	if err != nil {
		b.Fatalf("creating the root: %v", err)
	}
	ra, _ := c.agent(root)
	benchAgents(b, c, fanOutChildren, "c", root, "fanout-child")

	events, cancel := c.Subscribe(root)
	defer cancel()
	consumed := 0
	runIDs := map[string]int{} // wake run id -> replies it shows
	// waitConsumed follows the root's log until its wake turns have
	// completed want replies in all, then waits for the root to be idle.
	waitConsumed := func(want int) {
		timeout := time.NewTimer(5 * time.Minute)
		defer timeout.Stop()
		for consumed < want {
			select {
			case ev, ok := <-events:
				if !ok {
					b.Fatal("the root's event subscription was dropped (the benchmark fell behind)")
				}
				countConsumed(b, ev.Entry, runIDs, &consumed)
			case <-timeout.C:
				b.Fatalf("the root consumed %d of %d replies in 5 minutes", consumed, want)
			}
		}
		for {
			changed := c.WaitChange()
			ra.mu.Lock()
			busy := ra.busy
			ra.mu.Unlock()
			if !busy {
				return
			}
			<-changed
		}
	}
	ctx := context.Background()
	round := func(i int) {
		res, err := c.Send(ctx, root, fmt.Sprintf("round %d", i), "", "", nil)
		if err != nil || res.Err != nil {
			b.Fatalf("the root's fan-out turn: %+v, %v", res, err)
		}
		waitConsumed((i + 1) * fanOutChildren)
	}
	round(0) // warm-up: every child's session has run a turn
	syncsBefore, kindsBefore := cfs.Fsyncs(), cfs.Kinds()
	b.ResetTimer()
	start := time.Now()
	for i := 1; i <= b.N; i++ {
		round(i)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	msgs := 2 * fanOutChildren * b.N
	b.ReportMetric(float64(msgs)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(ms(elapsed)/float64(b.N), "ms/round")
	b.ReportMetric(float64(cfs.Fsyncs()-syncsBefore)/float64(msgs), "fsyncs/msg")
	reportKinds(b, kindsBefore, cfs.Kinds(), msgs, "msg")
	b.ReportMetric(ms(fsyncMed), "fsync_p50_ms")
}

// countConsumed adds to consumed the replies a completed root turn showed.
func countConsumed(b *testing.B, e eventlog.Entry, runIDs map[string]int, consumed *int) {
	switch e.Event {
	case evTurnStart:
		var d turnStartData
		if err := decode(e, &d); err != nil {
			b.Fatal(err)
		}
		runIDs[d.RunID] = len(d.MessageIDs)
	case evTurnComplete:
		var d turnCompleteData
		if err := decode(e, &d); err != nil {
			b.Fatal(err)
		}
		*consumed += runIDs[d.RunID]
		delete(runIDs, d.RunID)
	case evTurnFailed:
		b.Fatalf("a root turn failed: %s", e.Data)
	case evMsgEnqueued:
		if strings.Contains(string(e.Data), `"kind":"error"`) {
			b.Fatalf("a child's turn failed: %s", e.Data)
		}
	}
}
