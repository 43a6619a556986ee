package remote

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/warren-dev/warren/provider"
)

// TestWireErrorsKeepTheirKind: each error the engine tells apart comes
// back across the wire as the same kind.
func TestWireErrorsKeepTheirKind(t *testing.T) {
	for _, c := range []struct {
		err  error
		kind string
		is   func(error) bool
	}{
		{fmt.Errorf("x: %w", provider.ErrRunSuspended), KindSuspended, func(e error) bool { return errors.Is(e, provider.ErrRunSuspended) }},
		{fmt.Errorf("x: %w", provider.ErrCannotRestore), KindCannotRestore, func(e error) bool { return errors.Is(e, provider.ErrCannotRestore) }},
		{provider.Transient(errors.New("429"), 3*time.Second), KindTransient, func(e error) bool {
			tr, after := provider.IsTransient(e)
			return tr && after == 3*time.Second
		}},
		{provider.Permanent(errors.New("bad")), KindPermanent, func(e error) bool { tr, _ := provider.IsTransient(e); return !tr }},
		{fmt.Errorf("turn: %w", context.Canceled), KindCanceled, func(e error) bool { tr, _ := provider.IsTransient(e); return tr }},
		{fmt.Errorf("x: %w", ErrPoolFull), KindPoolFull, func(e error) bool { return errors.Is(e, ErrPoolFull) }},
		{fmt.Errorf("x: %w", ErrAbandoned), KindAbandoned, func(e error) bool { return errors.Is(e, ErrAbandoned) }},
	} {
		w := Wire(c.err)
		if w.Kind != c.kind || w.Message != c.err.Error() {
			t.Errorf("Wire(%v) = %+v, want kind %s", c.err, w, c.kind)
		}
		if back := w.Err(); !c.is(back) {
			t.Errorf("kind %s came back as %v", c.kind, back)
		}
	}
	if Wire(nil) != nil || (*WireError)(nil).Err() != nil {
		t.Error("nil must cross as nil")
	}
}

// TestRegistrationCheck refuses registrations the directory cannot use.
func TestRegistrationCheck(t *testing.T) {
	ok := Registration{Worker: "w1", Boot: "b", Pools: map[string]PoolState{"scripted": {Size: 2}}}
	if err := ok.Check("w1"); err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]Registration{
		"another key": {Worker: "w2", Boot: "b"},
		"no boot":     {Worker: "w1"},
		"bad size":    {Worker: "w1", Boot: "b", Pools: map[string]PoolState{"scripted": {Size: -1}}},
		"no name":     {Worker: "w1", Boot: "b", Pools: map[string]PoolState{"": {Size: 1}}},
	} {
		if err := r.Check("w1"); err == nil {
			t.Errorf("%s: %+v accepted", name, r)
		}
	}
	for _, id := range []string{"", "a.b", "a*", ">", "a b", string(make([]byte, 65))} {
		if CheckID(id) == nil {
			t.Errorf("CheckID(%q) accepted", id)
		}
	}
}

// TestSpecCrossesWithCallIDs: a spec's history keeps its calls' ids
// (the HTTP providers derive replayed tool-call ids from them).
func TestSpecCrossesWithCallIDs(t *testing.T) {
	s := provider.Spec{AgentID: "a", Model: "m", History: []provider.Turn{{Message: "hi", Response: "yo",
		Calls: []provider.ToolCall{{ID: "c1", Tool: "t", Args: map[string]any{"x": 1}, Error: "no"}}}}}
	back := SpecOf(s).Provider()
	if back.History[0].Calls[0].ID != "c1" || back.History[0].Calls[0].Error != "no" || back.AgentID != "a" {
		t.Fatalf("spec came back as %+v", back)
	}
}
