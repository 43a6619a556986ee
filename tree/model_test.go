package tree

import (
	"errors"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
)

// TestRandomOpsKeepInvariants applies random adds and removes and checks
// the tree's invariants after each: every agent's path resolves back to it,
// names are unique among siblings and among roots, Walk and Len agree,
// and routing is symmetric. Seeded and quick by default; WARREN_LONG=1 runs
// many more seeds.
func TestRandomOpsKeepInvariants(t *testing.T) {
	seeds, steps := 4, 150
	if os.Getenv("WARREN_LONG") == "1" {
		seeds, steps = 100, 500
	}
	names := []string{"a", "b", "c", "lead", "worker"}
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(uint64(seed), 1))
		tr := New()
		next := 1
		for step := range steps {
			all := tr.Walk()
			if len(all) == 0 || rng.IntN(3) > 0 {
				parent := ""
				if len(all) > 0 && rng.IntN(4) > 0 {
					parent = all[rng.IntN(len(all))]
				}
				name := names[rng.IntN(len(names))]
				err := tr.Add(id(next), name, parent)
				next++
				if err != nil && !errors.Is(err, ErrNameTaken) {
					t.Fatalf("seed %d step %d: Add: %v", seed, step, err)
				}
			} else {
				victim := all[rng.IntN(len(all))]
				err := tr.Remove(victim)
				hasKids := len(tr.Children(victim)) > 0
				if hasKids != errors.Is(err, ErrHasChildren) || (!hasKids && err != nil) {
					t.Fatalf("seed %d step %d: Remove: %v (children: %v)", seed, step, err, hasKids)
				}
			}
			checkInvariants(t, tr, step%10 == 0)
			if t.Failed() {
				t.Fatalf("seed %d step %d", seed, step)
			}
		}
	}
}

// checkInvariants checks the tree; allPairs adds the quadratic check that no
// route beyond one hop is allowed.
func checkInvariants(t *testing.T, tr *Tree, allPairs bool) {
	t.Helper()
	all := tr.Walk()
	if len(all) != tr.Len() {
		t.Errorf("Walk has %d agents, Len %d", len(all), tr.Len())
	}
	rootNames := map[string]bool{}
	for _, r := range tr.Roots() {
		n := tr.Name(r)
		if rootNames[n] {
			t.Errorf("two roots named %q", n)
		}
		rootNames[n] = true
	}
	for _, a := range all {
		if got, err := tr.Resolve("/" + tr.Path(a)); err != nil || got != a {
			t.Errorf("Resolve(/Path(%s)=%q) = %q, %v", a, tr.Path(a), got, err)
		}
		if got, err := tr.Resolve(tr.Path(a)); err == nil && got != a {
			t.Errorf("Resolve(Path(%s)=%q) = %q, another agent", a, tr.Path(a), got)
		} else if err != nil && !errors.Is(err, ErrAmbiguous) {
			t.Errorf("Resolve(Path(%s)=%q) = %v", a, tr.Path(a), err)
		}
		if got, err := tr.Resolve(a); err != nil && !errors.Is(err, ErrAmbiguous) || err == nil && got != a {
			t.Errorf("Resolve(id %s) = %q, %v", a, got, err)
		}
		node, _ := tr.Get(a)
		seen := map[string]bool{}
		for _, c := range node.Children {
			n := tr.Name(c)
			if seen[n] || n == node.Name {
				t.Errorf("child name %q repeats under %s", n, tr.Path(a))
			}
			seen[n] = true
			if p, _ := tr.Parent(c); p != a {
				t.Errorf("child %s has parent %s, want %s", c, p, a)
			}
		}
		for _, b := range tr.Reachable(a) {
			if tr.CheckRoute(a, b) != nil || tr.CheckRoute(b, a) != nil {
				t.Errorf("route %s <-> %s not allowed both ways", tr.Path(a), tr.Path(b))
			}
		}
		for _, b := range all {
			if !allPairs {
				break
			}
			if b != a && !slices.Contains(tr.Reachable(a), b) && tr.CheckRoute(a, b) == nil {
				t.Errorf("route %s -> %s allowed but not one hop", tr.Path(a), tr.Path(b))
			}
		}
	}
}

// FuzzResolve: no reference makes Resolve or Lookup panic, and a success
// names an agent in the tree.
func FuzzResolve(f *testing.F) {
	for _, s := range []string{"lead", "lead/worker", "worker", "/", "//", id(2), "00000000-0000-0000-0000-000000000002", "USER", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ref string) {
		tr := New()
		_ = tr.Add(id(1), "lead", "")
		_ = tr.Add(id(2), "worker", id(1))
		_ = tr.Add(id(3), "other", "")
		_ = tr.Add(id(4), "worker", id(3))
		if got, err := tr.Resolve(ref); err == nil && !tr.Has(got) {
			t.Fatalf("Resolve(%q) = %q, not in the tree", ref, got)
		}
		if got, err := tr.Lookup(id(2), ref); err == nil && !tr.Has(got) && got != User {
			t.Fatalf("Lookup(%q) = %q", ref, got)
		}
		_ = tr.Add(id(9), ref, id(2))
		_ = ValidateName(ref)
	})
}
