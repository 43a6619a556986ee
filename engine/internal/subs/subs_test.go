package subs

import (
	"testing"

	"github.com/warren-dev/warren/projection"
)

// The index lists the subscriptions to a target; an agent that terminates
// takes the subscriptions to it (returned, for its terminated notice) and
// those it made out of the index.
func TestIndexDropAgent(t *testing.T) {
	var x Index
	x.Add(projection.Subscription{ID: "s1", Target: "t", From: "*", To: "idle"}, "a")
	x.Add(projection.Subscription{ID: "s2", Target: "t", From: "busy", To: "*"}, "b")
	x.Add(projection.Subscription{ID: "s3", Target: "a", From: "*", To: "*"}, "t")
	if n := len(x.Of("t")); n != 2 {
		t.Fatalf("%d subscriptions to t, want 2", n)
	}
	w := x.DropAgent("t")
	if len(w) != 2 || len(x.Of("t")) != 0 || len(x.Of("a")) != 0 {
		t.Fatalf("after t terminated: watchers %v, to t %v, to a %v", w, x.Of("t"), x.Of("a"))
	}
	x.Add(projection.Subscription{ID: "s4", Target: "b", From: "*", To: "*"}, "a")
	x.Remove(projection.Subscription{ID: "s4", Target: "b"})
	if len(x.Of("b")) != 0 {
		t.Fatal("Remove left the subscription")
	}
}

func TestMatches(t *testing.T) {
	s := Sub{Subscription: projection.Subscription{From: "*", To: "idle"}}
	if !s.Matches("busy", "idle") || s.Matches("idle", "busy") {
		t.Fatal("from * to idle")
	}
	s.From, s.To = "waiting", "*"
	if !s.Matches("waiting", "idle") || s.Matches("busy", "idle") {
		t.Fatal("from waiting to *")
	}
}
