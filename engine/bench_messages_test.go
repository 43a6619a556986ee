package engine

// Message-path benchmark (issue 4): a fan-out from one root to 100 children
// and back, through send_message, wake and turn, on the real disk with the
// inproc provider.
//
//	go test -run '^$' -bench 'BenchmarkFanOut' -benchtime 5x ./engine/
//
// One iteration is one round: the root's turn sends a message to each of
// the 100 children with send_message; every child's wake turn replies to
// the root with send_message; the round ends when the root's wake turns
// have completed (consumed) all 100 replies. A round delivers 200 messages;
// msgs/s counts them. fsyncs/msg counts file and directory syncs.
//
// calls=one-by-one: the root's program makes its 100 send_message calls one
// after another, each waiting for the last (a model that emits one tool
// call per step). calls=one-step: it makes them as one model step of 100
// calls (parallel tool-use blocks, inproc Turn.CallBatch), which the daemon
// runs together (tools_attempt.go).

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/warren-dev/warren/bus"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/schema"
)

const fanOutChildren = 100

func BenchmarkFanOut(b *testing.B) {
	for _, batched := range []bool{false, true} {
		for _, pool := range []int{4, 128} {
			b.Run(fmt.Sprintf("children=%d/pool=%d/calls=%s", fanOutChildren, pool, callsName(batched)), func(b *testing.B) {
				benchFanOut(b, pool, batched)
			})
		}
	}
}

func callsName(batched bool) string {
	if batched {
		return "one-step"
	}
	return "one-by-one"
}

// fanOut is a core with a root and its children wired for fan-out rounds.
type fanOut struct {
	tb       testing.TB
	c        *Core
	root     *agent
	children int
	events   <-chan bus.Event
	consumed int
	runIDs   map[string]int // root run id -> replies its turn shows
	rounds   int
	// fanTime is the time spent in the root's fan-out turns (Send), the
	// rest of a round is waiting for the replies to be consumed.
	fanTime, replyTime time.Duration
}

// newFanOut builds the core: the root's program sends one message to each
// child when a user message starts a round ("round N") and says "noted" to
// the wake prompts showing replies; each
// child's program replies to the root.
func newFanOut(tb testing.TB, fsys faultfs.FS, home string, children, pool int, batched bool) *fanOut {
	prov := inproc.New("inproc", inproc.Options{NativeResume: true})
	prov.Register("fanout-root", func(ctx context.Context, t *inproc.Turn) (string, error) {
		if !strings.HasPrefix(t.Prompt, "round ") {
			return "noted", nil // a wake turn consuming replies
		}
		calls := make([]provider.ToolRequest, children)
		for i := range calls {
			calls[i] = provider.ToolRequest{Tool: "send_message",
				Args: map[string]any{"recipient": fmt.Sprintf("c%d", i), "text": "task " + t.Prompt}}
		}
		results := make([]map[string]any, children)
		if batched {
			var err error
			if results, err = t.CallBatch(calls); err != nil {
				return "", err
			}
		} else {
			for i, c := range calls {
				var err error
				if results[i], err = t.Call(c.Tool, c.Args); err != nil {
					return "", err
				}
			}
		}
		for i, res := range results {
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
	c := benchCore(tb, home, fsys, prov, pool, false)
	rootID, err := c.CreateAgent(context.Background(), CreateSpec{Name: "root", Provider: "inproc", Model: "fanout-root"})
	if err != nil {
		tb.Fatalf("creating the root: %v", err)
	}
	benchAgents(tb, c, children, "c", rootID, "fanout-child")
	root, _ := c.agent(rootID)
	events, cancel := c.Subscribe(rootID)
	tb.Cleanup(cancel)
	return &fanOut{tb: tb, c: c, root: root, children: children, events: events, runIDs: map[string]int{}}
}

// round runs one fan-out round and returns when the root's wake turns have
// completed every reply and the root is idle again.
func (f *fanOut) round() {
	f.tb.Helper()
	f.rounds++
	t0 := time.Now()
	res, err := f.c.Send(context.Background(), f.root.ID(), fmt.Sprintf("round %d", f.rounds), "", "", nil)
	if err != nil || res.Err != nil {
		f.tb.Fatalf("the root's fan-out turn: %+v, %v", res, err)
	}
	t1 := time.Now()
	f.fanTime += t1.Sub(t0)
	defer func() { f.replyTime += time.Since(t1) }()
	want := f.rounds * f.children
	timeout := time.NewTimer(5 * time.Minute)
	defer timeout.Stop()
	for f.consumed < want {
		select {
		case ev, ok := <-f.events:
			if !ok {
				f.tb.Fatal("the root's event subscription was dropped (the benchmark fell behind)")
			}
			f.count(ev.Entry)
		case <-timeout.C:
			f.tb.Fatalf("the root consumed %d of %d replies in 5 minutes", f.consumed, want)
		}
	}
	for {
		changed := f.c.WaitChange()
		busy := look(f.root, func(_ *projection, l liveFlags) bool { return l.Busy })
		if !busy {
			return
		}
		select {
		case <-changed:
		case <-timeout.C:
			f.tb.Fatalf("the root stayed busy for 5 minutes after consuming its replies")
		}
	}
}

// count adds to consumed the replies a completed root turn showed.
func (f *fanOut) count(e eventlog.Entry) {
	switch e.Event {
	case schema.TurnStart:
		var d schema.TurnStartData
		if err := decode(e, &d); err != nil {
			f.tb.Fatal(err)
		}
		f.runIDs[d.RunID] = len(d.MessageIDs)
	case schema.TurnComplete:
		var d schema.TurnCompleteData
		if err := decode(e, &d); err != nil {
			f.tb.Fatal(err)
		}
		f.consumed += f.runIDs[d.RunID]
		delete(f.runIDs, d.RunID)
	case schema.TurnFailed:
		f.tb.Fatalf("a root turn failed: %s", e.Data)
	case schema.MessageEnqueued:
		if strings.Contains(string(e.Data), `"kind":"error"`) {
			f.tb.Fatalf("a child's turn failed: %s", e.Data)
		}
	}
}

func benchFanOut(b *testing.B, pool int, batched bool) {
	dir := benchDir(b)
	fsyncMed, _ := fsyncP50(b, dir, 300)
	cfs := newCountingFS(faultfs.OS{})
	f := newFanOut(b, cfs, dir+"/home", fanOutChildren, pool, batched)
	f.round() // warm-up: every child's session has run a turn
	f.fanTime, f.replyTime = 0, 0
	syncsBefore, kindsBefore := cfs.Fsyncs(), cfs.Kinds()
	b.ResetTimer()
	cpu0, start := cpuTime(), time.Now()
	for i := 0; i < b.N; i++ {
		f.round()
	}
	elapsed, cpu := time.Since(start), cpuTime()-cpu0
	b.StopTimer()
	msgs := 2 * fanOutChildren * b.N
	b.ReportMetric(float64(msgs)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(ms(elapsed)/float64(b.N), "ms/round")
	b.ReportMetric(ms(f.fanTime)/float64(b.N), "fanout_turn_ms/round")
	b.ReportMetric(ms(f.replyTime)/float64(b.N), "replies_ms/round")
	b.ReportMetric(float64(cfs.Fsyncs()-syncsBefore)/float64(msgs), "fsyncs/msg")
	reportKinds(b, kindsBefore, cfs.Kinds(), msgs, "msg")
	b.ReportMetric(ms(fsyncMed), "fsync_p50_ms")
	b.ReportMetric(ms(cpu)/float64(msgs), "cpu_ms/msg")
}

// TestFanOutRoundsComplete checks the benchmark's driver on a small tree in
// memory: each round, every child gets one message and the root consumes
// every reply.
func TestFanOutRoundsComplete(t *testing.T) {
	for _, batched := range []bool{false, true} {
		t.Run("calls="+callsName(batched), func(t *testing.T) { testFanOutRounds(t, batched) })
	}
}

func testFanOutRounds(t *testing.T, batched bool) {
	fsys := faultfs.NewMem()
	f := newFanOut(t, fsys, "/home", 5, 4, batched)
	f.round()
	f.round()
	if f.consumed != 10 {
		t.Fatalf("the root consumed %d replies in 2 rounds of 5, want 10", f.consumed)
	}
	rootLog, err := f.c.Log(context.Background(), f.root.ID(), 0)
	if err != nil {
		t.Fatal(err)
	}
	sent := 0
	for _, e := range rootLog {
		if e.Event == schema.ToolCall {
			sent++
		}
	}
	if sent != 10 {
		t.Fatalf("the root sent %d messages in 2 rounds of 5, want 10 (a wake turn must not start a new round)", sent)
	}
	// A child's reply can reach the root before the child's own turn.complete
	// is written: wait until every turn has ended before counting.
	deadline := time.After(15 * time.Second)
	for {
		changed := f.c.WaitChange()
		if f.c.Idle() {
			break
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatal("the children's turns did not end")
		}
	}
	for i := 0; i < 5; i++ {
		id, err := f.c.Resolve(fmt.Sprintf("root/c%d", i))
		if err != nil {
			t.Fatal(err)
		}
		es, err := f.c.Log(context.Background(), id, 0)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range es {
			if e.Event == schema.TurnComplete {
				n++
			}
		}
		if n != 2 {
			t.Errorf("child c%d completed %d turns in 2 rounds, want 2", i, n)
		}
	}
}

// decode decodes an entry's data into v.
func decode(e eventlog.Entry, v any) error {
	if err := json.Unmarshal(e.Data, v); err != nil {
		return fmt.Errorf("event %s at seq %d: bad data: %w", e.Event, e.Seq, err)
	}
	return nil
}
