package engine

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/warren-dev/warren/engine/internal/placement"
	fold "github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/tree"
)

// Agent ids (the tree takes 32 lowercase hex characters).
const (
	a1 = "000000000000000000000000000000a1"
	a2 = "000000000000000000000000000000a2"
	a3 = "000000000000000000000000000000a3"
	a8 = "000000000000000000000000000000a8"
	a9 = "000000000000000000000000000000a9"
	q1 = "000000000000000000000000000000f1"
	x  = "000000000000000000000000000000ff"
)

// served returns a roster serving agents lead (a root) and w1 (its
// child), both in the tree.
func served(t *testing.T) (*roster, *tree.Tree, map[string]*agent) {
	t.Helper()
	tr := tree.New()
	r := newRoster(tr)
	as := map[string]*agent{}
	for _, n := range []struct{ id, name, parent string }{{a1, "lead", ""}, {a2, "w1", a1}} {
		if closed, err := r.Reserve(n.id, n.name, n.parent); closed || err != nil {
			t.Fatalf("Reserve(%s) = %v, %v; want false, nil", n.id, closed, err)
		}
		as[n.id] = newAgent(n.id, nil, fold.New())
		r.Put(n.id, as[n.id])
	}
	return r, tr, as
}

func TestGetListCountPut(t *testing.T) {
	r, _, as := served(t)
	if a, ok := r.Get(a2); !ok || a != as[a2] {
		t.Fatalf("Get(a2) = %p, %v; want the agent put", a, ok)
	}
	if _, ok := r.Get("nope"); ok {
		t.Fatal("Get of an id never put found one")
	}
	if n := r.Count(); n != 2 {
		t.Fatalf("Count = %d, want 2", n)
	}
	var ids []string
	for _, a := range r.List() {
		ids = append(ids, a.ID())
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []string{a1, a2}) {
		t.Fatalf("List ids = %v, want [a1 a2]", ids)
	}
}

func TestCloseRunsStopUnderTheLockOnceAndRefusesReserves(t *testing.T) {
	r, tr, _ := served(t)
	var stops int
	agents, first := r.Close(func() {
		stops++
		// Under the roster's lock: a reader would block, so TryLock fails.
		if r.mu.TryLock() {
			r.mu.Unlock()
			t.Error("stop ran without the roster's lock held")
		}
	})
	if !first || len(agents) != 2 || stops != 1 {
		t.Fatalf("first Close = %d agents, first %v, %d stops; want 2, true, 1", len(agents), first, stops)
	}
	if _, first := r.Close(func() { stops++ }); first {
		t.Fatal("a second Close reported first")
	}
	if !r.Closed() || !r.WakesHeld() {
		t.Fatalf("after Close: Closed %v, WakesHeld %v; want both true", r.Closed(), r.WakesHeld())
	}
	closed, err := r.Reserve(a3, "w2", a1)
	if !closed || err != nil {
		t.Fatalf("Reserve after Close = %v, %v; want true, nil", closed, err)
	}
	if _, err := tr.Resolve("lead/w2"); err == nil {
		t.Fatal("a Reserve refused after Close still added the agent to the tree")
	}
}

func TestRecoveringHoldsWakes(t *testing.T) {
	r := newRoster(tree.New())
	if r.WakesHeld() {
		t.Fatal("a new roster holds wakes")
	}
	r.SetRecovering(true)
	if !r.WakesHeld() {
		t.Fatal("wakes not held while recovering")
	}
	r.SetRecovering(false)
	if r.WakesHeld() || r.Closed() {
		t.Fatal("wakes still held after recovery, or the roster closed")
	}
}

func TestReserveRefusedByTheTreeAndUnreserve(t *testing.T) {
	r, tr, _ := served(t)
	if closed, err := r.Reserve(a3, "w1", a1); closed || err == nil {
		t.Fatalf("Reserve of a sibling's name = %v, %v; want the tree's error", closed, err)
	}
	if closed, err := r.Reserve(a3, "w2", a1); closed || err != nil {
		t.Fatalf("Reserve(a3) = %v, %v", closed, err)
	}
	r.Unreserve(a3)
	if _, err := tr.Resolve("lead/w2"); err == nil {
		t.Fatal("Unreserve left the agent in the tree")
	}
}

func TestUnlistTakesAnAgentOutInOneStep(t *testing.T) {
	r, tr, as := served(t)
	sub := fold.Subscription{ID: "s1", Target: a2, From: "*", To: "*"}
	if !r.Index(sub, a1) {
		t.Fatal("Index refused a subscription to a served agent")
	}
	info := &goneInfo{Provider: "inproc"}
	watchers := r.Unlist(as[a2], "w1", a1, info)
	if len(watchers) != 1 || watchers[0].Subscriber != a1 || watchers[0].ID != "s1" {
		t.Fatalf("Unlist watchers = %+v; want a1's s1", watchers)
	}
	if !as[a2].Terminating() {
		t.Fatal("Unlist did not mark the agent terminating")
	}
	if _, ok := r.Get(a2); ok || r.Count() != 1 {
		t.Fatal("Unlist left the agent in the table")
	}
	if _, err := tr.Resolve("lead/w1"); err == nil {
		t.Fatal("Unlist left the agent in the tree")
	}
	if !r.Known(a2) {
		t.Fatal("an unlisted agent is not known as gone")
	}
	if p := r.GonePath(a2); p != "lead/w1" {
		t.Fatalf("GonePath = %q, want lead/w1", p)
	}
	if w := r.Watchers(a2); len(w) != 0 {
		t.Fatalf("the index still holds %d subscriptions to the unlisted agent", len(w))
	}
	if r.Index(sub, a1) {
		t.Fatal("Index took a subscription to an agent gone")
	}
	reads := 0
	all := r.Terminated(func(string) *goneInfo { reads++; return nil })
	if reads != 0 || len(all) != 1 || all[0].Info != info {
		t.Fatalf("Terminated = %+v after %d reads; want a2 with the info Unlist gave, no read", all, reads)
	}
}

func TestIndexRefusesATargetTerminating(t *testing.T) {
	r, _, as := served(t)
	if r.Index(fold.Subscription{ID: "s0", Target: "nope"}, a1) {
		t.Fatal("Index took a subscription to an agent never served")
	}
	func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		as[a2].SetTerminating()
	}()
	if r.Index(fold.Subscription{ID: "s1", Target: a2}, a1) {
		t.Fatal("Index took a subscription to an agent being terminated")
	}
	sub := fold.Subscription{ID: "s2", Target: a1, From: "*", To: "idle"}
	if !r.Index(sub, a2) || len(r.Watchers(a1)) != 1 {
		t.Fatal("Index refused a subscription to a served agent")
	}
	r.Unindex(sub)
	if len(r.Watchers(a1)) != 0 {
		t.Fatal("Unindex left the subscription")
	}
}

func TestForgetAndTerminatedReadsInfoOnce(t *testing.T) {
	tr := tree.New()
	if err := tr.Add(a1, "lead", ""); err != nil {
		t.Fatal(err)
	}
	r := newRoster(tr)
	r.Forget(a9, "old", a1)
	if !r.Known(a9) || r.GonePath(a9) != "lead/old" {
		t.Fatalf("after Forget: Known %v, GonePath %q; want true, lead/old", r.Known(a9), r.GonePath(a9))
	}
	if r.Known(a8) || r.GonePath(a8) != "" {
		t.Fatal("an id never seen is known")
	}
	var reads []string
	read := func(id string) *goneInfo {
		reads = append(reads, id)
		return &goneInfo{Model: "m-" + id[len(id)-2:]}
	}
	for range 2 {
		all := r.Terminated(read)
		if len(all) != 1 || all[0].Info == nil || all[0].Info.Model != "m-a9" {
			t.Fatalf("Terminated = %+v; want a9 with the info read", all)
		}
	}
	if !slices.Equal(reads, []string{a9}) {
		t.Fatalf("info reads = %v; want one, of a9", reads)
	}
}

func TestQuarantineAndParents(t *testing.T) {
	r, _, as := served(t)
	r.SetQuarantine(map[string]string{q1: "/home/quarantine/q1"})
	if r.QuarantinedAs(q1) != "/home/quarantine/q1" || r.QuarantinedAs(a1) != "" || r.Quarantined() != 1 {
		t.Fatalf("quarantine reads wrong: %q %q %d", r.QuarantinedAs(q1), r.QuarantinedAs(a1), r.Quarantined())
	}
	as[a2].MarkCorrupt(fmt.Errorf("open: %w", errUnopened))
	got := r.Parents([]placement.Candidate{{Parent: a1}, {Parent: a2}, {Parent: q1}, {Parent: x}})
	want := map[string]placement.Parent{
		a1: {Listed: true, InTree: true},
		a2: {Listed: true, InTree: true, Unopened: true},
		q1: {Quarantined: true},
		x:  {},
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("Parents[%s] = %+v, want %+v", id, got[id], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("Parents has %d entries, want %d", len(got), len(want))
	}
}

// TestConcurrentUse runs the roster's methods from many goroutines; under
// -race it fails if any of them reads or writes its state unlocked.
func TestConcurrentUse(t *testing.T) {
	r, _, _ := served(t)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			id, name := fmt.Sprintf("%032x", 100+i), fmt.Sprintf("c%d", i)
			if closed, err := r.Reserve(id, name, a1); closed || err != nil {
				t.Errorf("Reserve(%s) = %v, %v", id, closed, err)
				return
			}
			a := newAgent(id, nil, fold.New())
			r.Put(id, a)
			r.Index(fold.Subscription{ID: "s" + id, Target: a1, From: "*", To: "*"}, id)
			_ = r.List()
			_ = r.Watchers(a1)
			_ = r.WakesHeld()
			r.Unlist(a, fmt.Sprintf("c%d", i), a1, nil)
		})
	}
	wg.Wait()
	if n := r.Count(); n != 2 {
		t.Fatalf("Count = %d after every goroutine unlisted its agent; want 2", n)
	}
	if errs := r.Terminated(func(string) *goneInfo { return nil }); len(errs) != 8 {
		t.Fatalf("%d agents remembered as gone, want 8", len(errs))
	}
}

func TestResolve(t *testing.T) {
	r, _, _ := served(t)
	bad := newAgent(a3, nil, fold.New())
	bad.View(func(p *fold.State, _ liveFlags) { p.Name = "broken" })
	bad.MarkCorrupt(errors.New("damaged at line 3"))
	r.Put(a3, bad) // corrupt: served, not in the tree
	for _, tc := range []struct {
		ref, want string
		kind      error
	}{
		{"lead/w1", a2, nil},
		{"w1", a2, nil},
		{a1, a1, nil},
		{a3, a3, nil},
		{"broken", a3, nil},
		{"", "", ErrInvalid},
		{"nobody", "", ErrNotFound},
		{a9, "", ErrNotFound},
	} {
		got, err := r.Resolve(tc.ref)
		if got != tc.want || (tc.kind == nil) != (err == nil) || (tc.kind != nil && !errors.Is(err, tc.kind)) {
			t.Errorf("Resolve(%q) = %q, %v; want %q and an error of kind %v", tc.ref, got, err, tc.want, tc.kind)
		}
	}
	if closed, err := r.Reserve(a8, "w1", ""); closed || err != nil {
		t.Fatalf("Reserve of a second w1 at the root = %v, %v", closed, err)
	}
	if _, err := r.Resolve("w1"); !errors.Is(err, ErrInvalid) || !errors.Is(err, tree.ErrAmbiguous) {
		t.Fatalf("Resolve of an ambiguous name = %v; want Invalid wrapping tree.ErrAmbiguous", err)
	}
}

func TestOrderedIsTreeOrderThenTheRest(t *testing.T) {
	r, _, _ := served(t)
	r.Put(a3, newAgent(a3, nil, fold.New())) // not in the tree
	var ids []string
	for _, a := range r.Ordered() {
		ids = append(ids, a.ID())
	}
	if !slices.Equal(ids, []string{a1, a2, a3}) {
		t.Fatalf("Ordered = %v; want the root, its child, then the agent outside the tree", ids)
	}
}

func TestDisplayName(t *testing.T) {
	r, _, as := served(t)
	bad := newAgent(a3, nil, fold.New())
	bad.View(func(p *fold.State, _ liveFlags) { p.Name = "broken" })
	r.Put(a3, bad)
	r.Unlist(as[a2], "w1", a1, nil)
	for id, want := range map[string]string{
		tree.User: tree.User, tree.System: tree.System,
		a1: "lead", a3: "broken", a2: "lead/w1", a9: a9,
	} {
		if got := r.DisplayName(id); got != want {
			t.Errorf("DisplayName(%s) = %q, want %q", id, got, want)
		}
	}
}
