package tree

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestCheckRoute(t *testing.T) {
	tr := fixture(t)
	// lead(1){worker(2){helper(4)}, critic(3), tester(5)}, other(6){worker(7)}
	for _, tc := range []struct {
		desc     string
		from, to string
		err      error
		msgHas   string
	}{
		{"child to parent", id(2), id(1), nil, ""},
		{"parent to child", id(1), id(2), nil, ""},
		{"sibling", id(2), id(3), nil, ""},
		{"sibling reverse", id(5), id(2), nil, ""},
		{"grandchild to parent", id(4), id(2), nil, ""},
		{"root to USER", id(1), User, nil, ""},
		{"other root to USER", id(6), User, nil, ""},
		{"SYSTEM to USER", System, User, nil, ""},
		{"SYSTEM to deep agent", System, id(4), nil, ""},
		{"USER to deep agent", User, id(4), nil, ""},
		{"self", id(2), id(2), ErrRoute, "cannot send to self"},
		{"USER to self", User, User, ErrRoute, "cannot send to self"},
		{"to SYSTEM", id(1), System, ErrRoute, "SYSTEM"},
		{"non-root to USER", id(2), User, ErrRoute, "only root agents can message USER"},
		{"grandparent", id(4), id(1), ErrRoute, "one-hop routing: lead/worker/helper can message only its parent, children and siblings; lead is none of these"},
		{"grandchild", id(1), id(4), ErrRoute, "one-hop routing"},
		{"uncle", id(4), id(3), ErrRoute, "one-hop routing"},
		{"nephew", id(3), id(4), ErrRoute, "one-hop routing"},
		{"cousin subtree", id(2), id(7), ErrRoute, "one-hop routing"},
		{"root to root", id(1), id(6), ErrRoute, "roots have no siblings"},
		{"unknown sender", id(99), id(1), ErrNotFound, "sender"},
		{"unknown recipient", id(1), id(99), ErrNotFound, "recipient"},
		{"SYSTEM to unknown", System, id(99), ErrNotFound, "recipient"},
	} {
		err := tr.CheckRoute(tc.from, tc.to)
		if tc.err == nil {
			if err != nil {
				t.Errorf("%s: CheckRoute = %v, want ok", tc.desc, err)
			}
			continue
		}
		if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.msgHas) {
			t.Errorf("%s: CheckRoute = %v; want %v containing %q", tc.desc, err, tc.err, tc.msgHas)
		}
	}
}

func TestBroadcastTargets(t *testing.T) {
	tr := fixture(t)
	if got, err := tr.BroadcastTargets(id(3)); err != nil || !slices.Equal(got, []string{id(2), id(5)}) {
		t.Errorf("BroadcastTargets(critic) = %v, %v", got, err)
	}
	for _, tc := range []struct {
		from   string
		err    error
		msgHas string
	}{
		{id(1), ErrRoute, "broadcast needs siblings: lead has none; roots have no siblings"},
		{id(4), ErrRoute, "lead/worker/helper has none"}, // only child
		{System, ErrRoute, "SYSTEM has none"},
		{User, ErrRoute, "USER has none"},
		{id(99), ErrNotFound, "not in the tree"},
	} {
		got, err := tr.BroadcastTargets(tc.from)
		if got != nil || !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.msgHas) {
			t.Errorf("BroadcastTargets(%s) = %v, %v; want %v containing %q", tc.from, got, err, tc.err, tc.msgHas)
		}
	}
}

// TestConcurrentUse runs writers and readers at once; run with -race. Each
// writer owns a disjoint subtree, so the final shape is deterministic.
func TestConcurrentUse(t *testing.T) {
	tr := New()
	const writers, perWriter = 4, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			root := id(1000 + w)
			if err := tr.Add(root, "root"+string(rune('a'+w)), ""); err != nil {
				t.Error(err)
				return
			}
			parent := root
			for i := range perWriter {
				cid := id(10000*(w+1) + i)
				if err := tr.Add(cid, "n"+string(rune('a'+i%26))+string(rune('a'+i/26)), parent); err != nil {
					t.Error(err)
					return
				}
				if i%2 == 0 {
					parent = cid
				}
			}
		}()
	}
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				for _, a := range tr.Walk() {
					tr.Path(a)
					tr.Siblings(a)
					_ = tr.CheckRoute(a, User)
					_, _ = tr.Resolve(a)
					_, _ = tr.Lookup(a, "na")
				}
				_, _ = tr.Resolve("nb")
			}
		}()
	}
	wg.Wait()
	if got, want := tr.Len(), writers*(perWriter+1); got != want {
		t.Fatalf("Len = %d, want %d", got, want)
	}
	if got := len(tr.Walk()); got != tr.Len() {
		t.Fatalf("Walk visits %d agents, Len = %d", got, tr.Len())
	}
	// Tear everything down concurrently, leaves first within each subtree.
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sub := tr.Subtree(id(1000 + w))
			for i := len(sub) - 1; i >= 0; i-- {
				if err := tr.Remove(sub[i]); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if tr.Len() != 0 || len(tr.Roots()) != 0 {
		t.Fatalf("after removing all: Len = %d, Roots = %v", tr.Len(), tr.Roots())
	}
}
