package daemon

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/warren-dev/warren/protocol"
	"github.com/warren-dev/warren/provider/inproc"
)

// frames is a server.Stream that records the frames a handler emits.
type frames struct {
	mu  sync.Mutex
	got []string
	evs []map[string]any
	// first is closed at the first frame; each event is also sent on
	// events (when not nil).
	first  chan struct{}
	once   sync.Once
	events chan string
}

func newFrames() *frames { return &frames{first: make(chan struct{}), events: make(chan string, 64)} }

func (f *frames) Chunk(text string) error {
	f.mu.Lock()
	f.got = append(f.got, "chunk "+text)
	f.mu.Unlock()
	f.once.Do(func() { close(f.first) })
	return nil
}

func (f *frames) Event(ev any) error {
	m := ev.(map[string]any)
	f.mu.Lock()
	f.got = append(f.got, fmt.Sprint("event ", m["event"]))
	f.evs = append(f.evs, m)
	f.mu.Unlock()
	f.once.Do(func() { close(f.first) })
	select {
	case f.events <- fmt.Sprint(m["event"]):
	default:
	}
	return nil
}

func TestStreamShowsEachRetryBeforeItsBackoff(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.cfg.RetryBaseDelay = 100 * time.Millisecond })
	h.prov.Register("flaky", inproc.FailTransient(2, 0, inproc.Echo))
	id := h.create("lead", "", "flaky")
	out := newFrames()
	params := protocol.Params{"agent_id": id, "message": "x"}
	if _, err := (&handler{c: h.c}).stream(context.Background(), params, out); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(out.got) != "[event turn.retry event turn.retry chunk echo: x]" {
		t.Fatalf("frames = %v, want two retries then the response", out.got)
	}
	r := out.evs[0]
	if r["agent_id"] != id || r["attempt"] != 1 || r["max_retries"] != 3 || r["delay_ms"] != int64(100) ||
		r["run_id"] == "" || r["error"] == "" {
		t.Fatalf("first retry frame = %v", r)
	}
	if out.evs[1]["attempt"] != 2 || out.evs[1]["delay_ms"] != int64(200) {
		t.Fatalf("second retry frame = %v", out.evs[1])
	}
}

func TestSubscribeReadyFrameComesFirstAndNothingAfterItIsMissed(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.cfg.RetryBaseDelay = time.Millisecond })
	h.prov.Register("flaky", inproc.FailTransient(1, 0, inproc.Echo))
	id := h.create("lead", "", "flaky")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := newFrames()
	done := make(chan error, 1)
	go func() {
		_, err := (&handler{c: h.c}).subscribe(ctx, protocol.Params{"ready": true}, out)
		done <- err
	}()
	timeout := time.After(15 * time.Second)
	select {
	case <-out.first:
	case <-timeout:
		t.Fatal("no frame from events.subscribe with ready: true")
	}
	h.send(id, "x") // started only once the subscription is in place
	for ev := ""; ev != "turn.complete"; {
		select {
		case ev = <-out.events:
		case <-timeout:
			t.Fatal("the subscriber never saw turn.complete")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	out.mu.Lock()
	defer out.mu.Unlock()
	if out.got[0] != "event subscribed" || out.evs[0]["agent_id"] != nil {
		t.Fatalf("first frame = %v, want the bare subscribed event", out.evs[0])
	}
	if fmt.Sprint(out.got[1:]) != "[event turn.start event turn.retry event turn.complete]" {
		t.Fatalf("frames after ready = %v", out.got[1:])
	}
}

func TestInspectReportsTheLastSeq(t *testing.T) {
	h := newHarness(t)
	id := h.create("lead", "", "echo")
	h.send(id, "x")
	m, err := inspectMap(h.c, id)
	if err != nil {
		t.Fatal(err)
	}
	es := h.entries(id)
	if m["last_seq"] != int64(es[len(es)-1].Seq) {
		t.Fatalf("last_seq = %v, want %d", m["last_seq"], es[len(es)-1].Seq)
	}
}
