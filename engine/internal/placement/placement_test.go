package placement

import (
	"reflect"
	"testing"
	"time"

	"github.com/warren-dev/warren/projection"
)

func TestClassify(t *testing.T) {
	ls := []Loaded{
		{ID: "a", Created: true},
		{ID: "b", Parent: "a", Created: true, Terminated: true},
		{ID: "c", Parent: "q", Damaged: true, Created: true},
		{ID: "q"},
		{ID: "d", Parent: "a", Created: true},
		{ID: "e", Damaged: true},
	}
	cl := Classify(ls)
	if want := []Class{Live, Gone, Corrupt, Uncreated, Live, Corrupt}; !reflect.DeepEqual(cl.Classes, want) {
		t.Errorf("classes = %v, want %v", cl.Classes, want)
	}
	// A damaged log's agent.created still names a parent and an existing id.
	if want := (Existing{"a": true, "b": true, "c": true, "d": true}); !reflect.DeepEqual(cl.Existing, want) {
		t.Errorf("existing = %v, want %v", cl.Existing, want)
	}
	if want := map[string]bool{"": true, "a": true, "q": true}; !reflect.DeepEqual(cl.Parents, want) {
		t.Errorf("parents = %v, want %v", cl.Parents, want)
	}
}

func TestSettle(t *testing.T) {
	named := "it holds no agent.created, but another agent's agent.created names it as parent"
	for _, tc := range []struct {
		name                                string
		empty, isParent, clustered, missing bool
		want                                Settlement
		why                                 string
	}{
		{name: "empty orphan", empty: true, want: RemoveOrphan, why: "w"},
		{name: "empty orphan on a cluster", empty: true, clustered: true, want: RemoveOrphan, why: "w"},
		{name: "empty but a parent", empty: true, isParent: true, want: Quarantine, why: named},
		{name: "empty but a parent on a cluster", empty: true, isParent: true, clustered: true, want: ListCorrupt, why: named},
		{name: "not empty", want: Quarantine, why: "w"},
		{name: "not empty on a cluster", clustered: true, want: ListCorrupt, why: "w"},
		{name: "no log on a cluster", clustered: true, missing: true, want: Quarantine, why: "w"},
	} {
		got, why := Settle("w", tc.empty, tc.isParent, tc.clustered, tc.missing)
		if got != tc.want || why != tc.why {
			t.Errorf("%s: Settle = %v, %q; want %v, %q", tc.name, got, why, tc.want, tc.why)
		}
	}
}

func TestOrder(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	for _, tc := range []struct {
		name    string
		cands   []Candidate
		parents map[string]Parent
		want    []Step
	}{{
		name: "roots by creation then id, children after their parents",
		cands: []Candidate{
			{ID: "k", Parent: "r2", Created: at(1)}, // older than its parent
			{ID: "r2", Created: at(2)},
			{ID: "r1", Created: at(2)},
			{ID: "g", Parent: "k", Created: at(0)},
		},
		// The first pass places r1, r2 (k and g wait); the second k, the third g.
		want: []Step{{"r1", Place}, {"r2", Place}, {"k", Place}, {"g", Place}},
	}, {
		name:  "a child after its parent in one pass",
		cands: []Candidate{{ID: "p", Created: at(0)}, {ID: "c", Parent: "p", Created: at(1)}},
		want:  []Step{{"p", Place}, {"c", Place}},
	}, {
		name:    "a parent the Core already placed",
		cands:   []Candidate{{ID: "c", Parent: "p", Created: at(0)}},
		parents: map[string]Parent{"p": {Listed: true, InTree: true}},
		want:    []Step{{"c", Place}},
	}, {
		name:  "a corrupt parent placed in the tree keeps its children's places",
		cands: []Candidate{{ID: "p", Created: at(0), Corrupt: true}, {ID: "c", Parent: "p", Created: at(1)}},
		want:  []Step{{"p", Place}, {"c", Place}},
	}, {
		name:    "a terminated parent: the orphan and, later, its child are terminated",
		cands:   []Candidate{{ID: "c", Parent: "x", Created: at(0)}, {ID: "g", Parent: "c", Created: at(1)}, {ID: "r", Created: at(2)}},
		parents: map[string]Parent{"x": {Gone: true}},
		want:    []Step{{"c", Terminate}, {"g", Terminate}, {"r", Place}},
	}, {
		name:    "a missing parent (no directory): its descendants are kept, never terminated",
		cands:   []Candidate{{ID: "c", Parent: "x", Created: at(0)}, {ID: "g", Parent: "c", Created: at(1)}},
		parents: map[string]Parent{"x": {}},
		want:    []Step{{"c", ParentMissing}, {"g", ParentUnplaced}},
	}, {
		name:    "a quarantined parent: listed, and its child listed outside the tree",
		cands:   []Candidate{{ID: "c", Parent: "x", Created: at(0)}, {ID: "g", Parent: "c", Created: at(1)}},
		parents: map[string]Parent{"x": {Quarantined: true}},
		want:    []Step{{"c", ParentQuarantined}, {"g", ParentUnplaced}},
	}, {
		name:    "an unopened parent's descendants are listed with it; a parent listed outside the tree keeps its child",
		cands:   []Candidate{{ID: "g", Parent: "c", Created: at(0)}, {ID: "c", Parent: "u", Created: at(1)}, {ID: "s", Parent: "u2", Created: at(2)}},
		parents: map[string]Parent{"u": {Listed: true, Unopened: true}, "u2": {Listed: true}},
		want:    []Step{{"c", ParentUnopened}, {"s", ParentUnplaced}, {"g", ParentUnopened}},
	}, {
		name:  "a cycle (only a forged log makes one) is kept, in creation order",
		cands: []Candidate{{ID: "b", Parent: "a", Created: at(1)}, {ID: "a", Parent: "b", Created: at(0)}, {ID: "s", Parent: "s", Created: at(2)}},
		want:  []Step{{"a", ParentMissing}, {"b", ParentMissing}, {"s", ParentMissing}},
	}, {
		name:  "nothing to place",
		cands: nil,
		want:  nil,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Order(tc.cands, tc.parents); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Order = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestOrderLeavesInputs(t *testing.T) {
	cands := []Candidate{{ID: "b", Created: time.Unix(2, 0)}, {ID: "a", Created: time.Unix(1, 0)}}
	parents := map[string]Parent{"": {}}
	Order(cands, parents)
	if cands[0].ID != "b" || len(parents) != 1 {
		t.Errorf("Order changed its inputs: %v %v", cands, parents)
	}
}

func TestCutSpawns(t *testing.T) {
	spawns := []projection.Spawn{
		{ChildID: "have", RunID: "r1"},
		{ChildID: "cut", RunID: "r1"},
		{ChildID: "open", RunID: "r2"},
		{ChildID: "cut", RunID: "r1"}, // named twice: created once
	}
	for _, tc := range []struct {
		name string
		run  *projection.Run
		want []string
	}{
		{name: "no run", run: nil, want: []string{"cut", "open"}},
		{name: "r2 open", run: &projection.Run{RunID: "r2"}, want: []string{"cut"}},
		{name: "r2 ended", run: &projection.Run{RunID: "r2", Ended: true}, want: []string{"cut", "open"}},
	} {
		e := Existing{"have": true}
		var got []string
		for _, sp := range e.CutSpawns(spawns, tc.run) {
			got = append(got, sp.ChildID)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: CutSpawns = %v, want %v", tc.name, got, tc.want)
		}
		for _, id := range tc.want {
			if !e[id] {
				t.Errorf("%s: %s not marked existing", tc.name, id)
			}
		}
	}
}

func TestKeepSpawnsAndPrune(t *testing.T) {
	e := Existing{"a": true}
	seen := []projection.Spawn{{ChildID: "a"}, {ChildID: "b"}}
	keep := e.KeepSpawns(seen)
	if len(keep) != 1 || keep[0].ChildID != "b" {
		t.Fatalf("KeepSpawns = %v, want [b]", keep)
	}
	// A spawn applied after recovery looked stays after the kept ones.
	now := append(append([]projection.Spawn(nil), seen...), projection.Spawn{ChildID: "c"})
	got := Prune(now, len(seen), keep)
	if want := []projection.Spawn{{ChildID: "b"}, {ChildID: "c"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("Prune = %v, want %v", got, want)
	}
	// Fewer than recovery looked at: left as it is.
	short := []int{1}
	if got := Prune(short, 2, nil); !reflect.DeepEqual(got, short) {
		t.Errorf("Prune of a shorter slice = %v, want %v", got, short)
	}
	if got := Prune([]int{1, 2}, 2, nil); len(got) != 0 {
		t.Errorf("Prune with nothing kept = %v, want empty", got)
	}
}

func TestNeedsBootstrap(t *testing.T) {
	for _, tc := range []struct {
		owed  bool
		turns int
		run   *projection.Run
		want  bool
	}{
		{true, 0, nil, true},
		{false, 0, nil, false}, // a root, or a child the operator created
		{true, 1, nil, false},
		{true, 0, &projection.Run{RunID: "r"}, false},
	} {
		if got := NeedsBootstrap(tc.owed, tc.turns, tc.run); got != tc.want {
			t.Errorf("NeedsBootstrap(%v, %d, %v) = %v, want %v", tc.owed, tc.turns, tc.run, got, tc.want)
		}
	}
}
