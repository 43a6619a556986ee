package engine

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/schema"
)

// What the list shows of a terminated agent is folded from its log: the
// provider of its latest turn, its times and its summed usage.
func TestInfoFold(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	entry := func(ev string, d any, ts time.Time) eventlog.Entry {
		b, _ := json.Marshal(d)
		return eventlog.Entry{Event: ev, Data: b, TS: ts}
	}
	var in goneInfo
	in.Fold(entry(schema.AgentCreated, schema.AgentCreatedData{Provider: "a", Model: "m1"}, t0))
	in.Fold(entry(schema.TurnStart, schema.TurnStartData{Provider: "b", Model: "m2"}, t0.Add(time.Second)))
	u := provider.Usage{InputTokens: 3}
	in.Fold(entry(schema.TurnComplete, schema.TurnCompleteData{Usage: &u}, t0.Add(2*time.Second)))
	in.Fold(entry(schema.TurnComplete, schema.TurnCompleteData{Usage: &u}, t0.Add(3*time.Second)))
	in.Fold(entry(schema.AgentTerminated, schema.AgentTerminatedData{}, t0.Add(4*time.Second)))
	if in.Provider != "b" || in.Model != "m2" || !in.CreatedAt.Equal(t0) || !in.LastTurnAt.Equal(t0.Add(time.Second)) ||
		!in.TerminatedAt.Equal(t0.Add(4*time.Second)) || in.Usage.InputTokens != 6 {
		t.Fatalf("folded %+v", in)
	}
}
