package gone

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/schema"
)

// A terminated agent's path is rebuilt through its terminated ancestors up
// to the first live one; an unknown id has none.
func TestRegistryPath(t *testing.T) {
	var r Registry
	if got := r.Path("x", func(string) string { return "" }); got != "" {
		t.Fatalf("empty registry: path %q, want none", got)
	}
	r.Remember("w1", "w1", "lead")
	r.Remember("g1", "g1", "w1")
	live := func(id string) string {
		if id == "lead" {
			return "root/lead"
		}
		return ""
	}
	if got := r.Path("g1", live); got != "root/lead/w1/g1" {
		t.Fatalf("path %q, want root/lead/w1/g1", got)
	}
	r.Remember("orphan", "orphan", "unknown")
	if got := r.Path("orphan", live); got != "orphan" {
		t.Fatalf("path of an agent whose parent is unknown: %q, want orphan", got)
	}
	if !r.Has("w1") || r.Has("lead") {
		t.Fatal("Has: w1 is terminated, lead is not")
	}
	if u := r.Unread(); len(u) != 3 {
		t.Fatalf("unread %v, want 3 ids", u)
	}
	r.SetInfo("w1", &Info{Provider: "p"})
	r.SetInfo("nobody", &Info{})
	if u := r.Unread(); len(u) != 2 || len(r.All()) != 3 {
		t.Fatalf("after SetInfo: unread %v, all %v", u, r.All())
	}
}

// What the list shows of a terminated agent is folded from its log: the
// provider of its latest turn, its times and its summed usage.
func TestInfoFold(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	entry := func(ev string, d any, ts time.Time) eventlog.Entry {
		b, _ := json.Marshal(d)
		return eventlog.Entry{Event: ev, Data: b, TS: ts}
	}
	var in Info
	in.fold(entry(schema.AgentCreated, schema.AgentCreatedData{Provider: "a", Model: "m1"}, t0))
	in.fold(entry(schema.TurnStart, schema.TurnStartData{Provider: "b", Model: "m2"}, t0.Add(time.Second)))
	u := provider.Usage{InputTokens: 3}
	in.fold(entry(schema.TurnComplete, schema.TurnCompleteData{Usage: &u}, t0.Add(2*time.Second)))
	in.fold(entry(schema.TurnComplete, schema.TurnCompleteData{Usage: &u}, t0.Add(3*time.Second)))
	in.fold(entry(schema.AgentTerminated, schema.AgentTerminatedData{}, t0.Add(4*time.Second)))
	if in.Provider != "b" || in.Model != "m2" || !in.CreatedAt.Equal(t0) || !in.LastTurnAt.Equal(t0.Add(time.Second)) ||
		!in.TerminatedAt.Equal(t0.Add(4*time.Second)) || in.Usage.InputTokens != 6 {
		t.Fatalf("folded %+v", in)
	}
}
