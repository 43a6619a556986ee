package lifecycle

import (
	"testing"

	"github.com/warren-dev/warren/tools"
)

// A child's spec inherits from a live parent; a gone parent passes
// nothing on.
func TestChildOfInheritsFromALiveParent(t *testing.T) {
	f := newFake()
	f.add("p1", "lead", "")
	v := tools.SpawnAgent{Name: "kid", Instructions: "go"}
	got := f.life().ChildOf("p1", "c1", v)
	if got.Provider != "p-p1" || got.Model != "m-p1" || got.Cwd != "/w/p1" || got.ParentID != "p1" || got.ID != "c1" {
		t.Fatalf("from a live parent: %+v", got)
	}
	got = f.life().ChildOf("gone", "c1", tools.SpawnAgent{Name: "kid", Model: "m"})
	if got.Provider != "" || got.Model != "m" || got.Cwd != "" || got.ParentID != "gone" {
		t.Fatalf("from a gone parent: %+v", got)
	}
}

// CheckChild checks the texts first, then the model, the provider and
// that the provider serves the model; the first refusal stops it.
func TestCheckChildOrder(t *testing.T) {
	f := newFake()
	if err := f.life().CheckChild(&Spec{Name: "kid", Provider: "p", Model: "m"}); err != nil {
		t.Fatal(err)
	}
	sameSteps(t, f.took(), "text", "model p m", "provider p", "served p m")
	if err := f.life().CheckChild(&Spec{Name: "kid", Provider: "p", Instructions: "too long"}); err == nil {
		t.Fatal("instructions over the limit were accepted")
	}
	sameSteps(t, f.took(), "text")
	f.badProvider = true
	if err := f.life().CheckChild(&Spec{Name: "kid", Provider: "p"}); kindOf(err) == nil {
		t.Fatalf("an unknown provider: %v", err)
	}
	sameSteps(t, f.took(), "text", "model p ", "provider p")
}

// DeferSpawn and MarkCompleting act on a live agent and do nothing for
// one that is gone; CreateChild starts the child's bootstrap turn unless
// NoWake.
func TestToolsSideNamesAgentsByID(t *testing.T) {
	f := newFake()
	f.add("p1", "lead", "")
	l := f.life()
	if l.DeferSpawn("gone", Spec{ID: "c1", Name: "kid"}) {
		t.Fatal("a spawn was accepted for a gone parent")
	}
	l.MarkCompleting("gone")
	sameSteps(t, f.took())
	if err := l.CreateChild(Spec{ID: "c2", Name: "kid", ParentID: "p1", Provider: "p", Model: "m"}); err != nil {
		t.Fatal(err)
	}
	if steps := f.took(); len(steps) == 0 || steps[len(steps)-1] != "c2 bootstrap" {
		t.Fatalf("CreateChild took %q, want the bootstrap last", steps)
	}
	l.NoWake = true
	if err := l.CreateChild(Spec{ID: "c3", Name: "kid3", ParentID: "p1", Provider: "p", Model: "m"}); err != nil {
		t.Fatal(err)
	}
	for _, s := range f.took() {
		if s == "c3 bootstrap" {
			t.Fatal("a bootstrap turn with NoWake")
		}
	}
	f.agents["p1"].look.Busy = true // in a turn: completes after it
	l.MarkCompleting("p1")
	sameSteps(t, f.took(), "p1 completing")
}
