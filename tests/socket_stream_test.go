package tests

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/warren-dev/warren/protocol"
)

// TestSocketAgentStreamChunks streams a turn over both framings: chunk
// frames whose concatenation is the response, then done; an unknown agent
// is a code-1 error frame.
func TestSocketAgentStreamChunks(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode procMode) {
		t.Parallel()
		d := startTestDaemon(t, mode)
		d.createAgent("st", "inproc", "echo", "")
		streams := map[string]func(ctx context.Context, m string, p map[string]any, on func(protocol.Frame) error) error{
			"msgpack": d.Client().Stream,
			"json": func(ctx context.Context, m string, p map[string]any, on func(protocol.Frame) error) error {
				return protocol.StreamJSON(ctx, d.Sock, m, p, on)
			},
		}
		for name, stream := range streams {
			var text strings.Builder
			chunks := 0
			err := stream(procCtx(t), "agent.stream", map[string]any{"agent_id": "st", "message": "over " + name}, func(f protocol.Frame) error {
				if f.Kind != protocol.KindChunk {
					return fmt.Errorf("unexpected frame %+v", f)
				}
				chunks++
				text.WriteString(f.Chunk)
				return nil
			})
			if err != nil || chunks == 0 || text.String() != "echo: over "+name {
				t.Fatalf("%s: agent.stream = %q in %d chunks, err %v", name, text.String(), chunks, err)
			}
			err = stream(procCtx(t), "agent.stream", map[string]any{"agent_id": "ghost", "message": "x"}, func(protocol.Frame) error { return nil })
			wantCode(t, name+" agent.stream of an unknown agent", err, 1)
			err = stream(procCtx(t), "agent.stream", map[string]any{"agent_id": "st"}, func(protocol.Frame) error { return nil })
			wantCode(t, name+" agent.stream without a message", err, 2)
		}
	})
}

// subEvent is one event frame of events.subscribe.
type subEvent struct {
	agent string
	seq   string
	event string
}

// TestSocketEventsSubscribe subscribes to all agents from seq 0 after some
// work: the logged events come first, then live ones as they are written,
// each agent's seqs gap-free from 1 and none repeated. A per-agent
// subscription sees only that agent.
func TestSocketEventsSubscribe(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode procMode) {
		t.Parallel()
		d := startTestDaemon(t, mode)
		a := d.createAgent("ea", "inproc", "echo", "")
		d.callN("agent.send", map[string]any{"agent_id": "ea", "message": "before"})

		ctx, cancel := context.WithCancel(procCtx(t))
		defer cancel()
		all := make(chan subEvent, 1024)
		one := make(chan subEvent, 1024)
		subscribe := func(params map[string]any, out chan<- subEvent) chan error {
			done := make(chan error, 1)
			cl, err := protocol.Dial(ctx, d.Sock)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cl.Close() })
			go func() {
				done <- cl.Stream(ctx, "events.subscribe", params, func(f protocol.Frame) error {
					if f.Kind != protocol.KindEvent {
						return fmt.Errorf("frame %+v is not an event", f)
					}
					out <- subEvent{agent: fmt.Sprint(f.Event["agent_id"]), seq: fmt.Sprint(f.Event["seq"]), event: fmt.Sprint(f.Event["event"])}
					return nil
				})
			}()
			return done
		}
		logged := d.callN("agent.log", map[string]any{"agent_id": "ea"})
		nLogged := len(logged["events"].([]any))
		doneAll := subscribe(map[string]any{"since_seq": 0}, all)
		doneOne := subscribe(map[string]any{"agent_id": "ea", "since_seq": 0}, one)

		// The logged events of ea come first, in order.
		next := map[string]int{a: 1}
		completes := map[string]int{}
		readOne := func() subEvent {
			t.Helper()
			select {
			case ev := <-all:
				want, ok := next[ev.agent]
				if !ok {
					t.Fatalf("event of an unknown agent: %+v", ev)
				}
				if ev.seq != fmt.Sprint(want) {
					t.Fatalf("agent %s: event seq %s, want %d (gap or repeat): %+v", ev.agent, ev.seq, want, ev)
				}
				next[ev.agent]++
				if ev.event == "turn.complete" {
					completes[ev.agent]++
				}
				return ev
			case err := <-doneAll:
				t.Fatalf("the subscription ended: %v", err)
			}
			return subEvent{}
		}
		for i := 0; i < nLogged; i++ {
			if ev := readOne(); ev.agent != a {
				t.Fatalf("replayed event %+v is not of agent ea", ev)
			}
		}
		// Then live events (creating agents during a replay is covered by
		// TestSocketSubscribeSinceSeqDuringCreates).
		b := d.createAgent("eb", "inproc", "echo", "")
		next[b] = 1
		d.callN("agent.send", map[string]any{"agent_id": "eb", "message": "live"})
		d.callN("agent.send", map[string]any{"agent_id": "ea", "message": "live too"})

		// Read until both agents' final turn.complete has been seen.
		for completes[a] < 2 || completes[b] < 1 {
			readOne()
		}
		// The per-agent subscription: only agent a, from seq 1.
		for i := 1; i < next[a]; i++ {
			select {
			case ev := <-one:
				if ev.agent != a || ev.seq != fmt.Sprint(i) {
					t.Fatalf("per-agent subscription event %+v, want agent %s seq %d", ev, a, i)
				}
			case err := <-doneOne:
				t.Fatalf("the per-agent subscription ended: %v", err)
			}
		}
		cancel()
		<-doneAll
		<-doneOne
		// Errors: unknown agent, mistyped params.
		err := d.Client().Stream(procCtx(t), "events.subscribe", map[string]any{"agent_id": "ghost"}, func(protocol.Frame) error { return nil })
		wantCode(t, "events.subscribe of an unknown agent", err, 1)
		err = d.Client().Stream(procCtx(t), "events.subscribe", map[string]any{"since_seq": "x"}, func(protocol.Frame) error { return nil })
		wantCode(t, "events.subscribe with a mistyped since_seq", err, 2)
	})
}
