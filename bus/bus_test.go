package bus

import (
	"encoding/json"
	"testing"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/schema"
)

func entry(seq uint64, event string, data any) eventlog.Entry {
	raw, _ := json.Marshal(data)
	return eventlog.Entry{Seq: seq, Event: event, Data: raw}
}

// TestPublishFiltersByAgentAndShowsTheSecretOnce: a subscriber of one agent
// sees only its entries, one of all agents sees every entry, and a live
// run.waiting carries the secret the bus's secret function gives.
func TestPublishFiltersByAgentAndShowsTheSecretOnce(t *testing.T) {
	b := New()
	b.SetSecret(func(agentID, runID string) string { return agentID + "/" + runID })
	one, cancel1 := b.Subscribe("a")
	defer cancel1()
	all, cancel2 := b.Subscribe("")
	defer cancel2()
	b.Publish("a", []eventlog.Entry{entry(1, schema.RunWaiting, map[string]any{"run_id": "r1"})})
	b.Publish("b", []eventlog.Entry{entry(1, "turn.start", map[string]any{})})
	if ev := <-one; ev.AgentID != "a" || ev.Token != "a/r1" {
		t.Fatalf("agent a's subscriber got %+v", ev)
	}
	if len(one) != 0 {
		t.Fatalf("agent a's subscriber got another agent's entry")
	}
	if ev := <-all; ev.AgentID != "a" {
		t.Fatalf("first event for all: %+v", ev)
	}
	if ev := <-all; ev.AgentID != "b" || ev.Token != "" {
		t.Fatalf("second event for all: %+v", ev)
	}
}

// TestSlowSubscriberLosesItsSubscription: a subscriber whose buffer is full
// has its channel closed; publishing never blocks.
func TestSlowSubscriberLosesItsSubscription(t *testing.T) {
	b := New()
	ch, cancel := b.Subscribe("")
	defer cancel()
	es := make([]eventlog.Entry, busBuffer+1)
	for i := range es {
		es[i] = entry(uint64(i+1), "turn.start", nil)
	}
	b.Publish("a", es)
	n := 0
	for range ch {
		n++
	}
	if n != busBuffer {
		t.Fatalf("got %d events before the close, want the buffer's %d", n, busBuffer)
	}
}

// TestDeltasOnlyToThoseWhoAsked and Close ends every subscription.
func TestDeltasOnlyToThoseWhoAskedAndClose(t *testing.T) {
	b := New()
	plain, c1 := b.Subscribe("a")
	defer c1()
	deltas, c2 := b.SubscribeWith("a", true)
	defer c2()
	b.PublishDelta("a", "r1", "hel")
	if ev := <-deltas; ev.Delta != "hel" || ev.RunID != "r1" {
		t.Fatalf("delta subscriber got %+v", ev)
	}
	if len(plain) != 0 {
		t.Fatal("a subscriber without deltas got one")
	}
	b.Close()
	if _, ok := <-plain; ok {
		t.Fatal("Close left a subscription open")
	}
	late, c3 := b.Subscribe("")
	defer c3()
	if _, ok := <-late; ok {
		t.Fatal("a subscription after Close is open")
	}
}

// TestSignalFiresWaiters: Wait's channel closes at the next Fire only.
func TestSignalFiresWaiters(t *testing.T) {
	var s Signal
	w := s.Wait()
	select {
	case <-w:
		t.Fatal("closed before Fire")
	default:
	}
	s.Fire()
	<-w
	if s.Wait() == w {
		t.Fatal("Wait after Fire returned the fired channel")
	}
}
