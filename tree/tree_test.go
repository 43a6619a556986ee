package tree

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func id(n int) string { return fmt.Sprintf("%032x", n) }

// fixture builds:
//
//	lead(1)
//	  worker(2)
//	    helper(4)
//	  critic(3)
//	  tester(5)
//	other(6)
//	  worker(7)
func fixture(t *testing.T) *Tree {
	t.Helper()
	tr := New()
	for _, a := range []struct {
		id     int
		name   string
		parent int
	}{
		{1, "lead", 0}, {2, "worker", 1}, {3, "critic", 1}, {4, "helper", 2},
		{5, "tester", 1}, {6, "other", 0}, {7, "worker", 6},
	} {
		p := ""
		if a.parent != 0 {
			p = id(a.parent)
		}
		if err := tr.Add(id(a.id), a.name, p); err != nil {
			t.Fatalf("Add(%d, %s): %v", a.id, a.name, err)
		}
	}
	return tr
}

func TestValidateName(t *testing.T) {
	long := "a" + strings.Repeat("b", 63)
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"a", true}, {"Lead", true}, {"w1", true}, {"a_b.c-d", true}, {long, true},
		{"", false}, {long + "c", false}, {"1abc", false}, {"_a", false}, {"-a", false},
		{".a", false}, {"a/b", false}, {"a b", false}, {"USER", false}, {"SYSTEM", false},
		{"ä", false}, {"a\n", false}, {"aé", false},
		{"user", true}, {"System2", true},
	} {
		err := ValidateName(tc.name)
		if tc.ok && err != nil {
			t.Errorf("ValidateName(%q) = %v, want ok", tc.name, err)
		}
		if !tc.ok && !errors.Is(err, ErrInvalidName) {
			t.Errorf("ValidateName(%q) = %v, want ErrInvalidName", tc.name, err)
		}
	}
}

func TestNormalizeID(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"0123456789abcdef0123456789abcdef", "0123456789abcdef0123456789abcdef"},
		{"0123456789ABCDEF0123456789ABCDEF", "0123456789abcdef0123456789abcdef"},
		{"01234567-89ab-cdef-0123-456789abcdef", "0123456789abcdef0123456789abcdef"},
		{"01234567-89AB-CDEF-0123-456789ABCDEF", "0123456789abcdef0123456789abcdef"},
		{"0123456789abcdef0123456789abcde", ""},
		{"0123456789abcdef0123456789abcdeg", ""},
		{"0123456-789ab-cdef-0123-456789abcdef", ""},
		{"", ""},
	} {
		got, ok := NormalizeID(tc.in)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("NormalizeID(%q) = %q, %v; want %q", tc.in, got, ok, tc.want)
		}
	}
}

func TestAddRules(t *testing.T) {
	tr := fixture(t)
	for _, tc := range []struct {
		desc         string
		id, name, pa string
		want         error
	}{
		{"sibling name taken", id(10), "critic", id(1), ErrNameTaken},
		{"parent's name", id(10), "lead", id(1), ErrNameTaken},
		{"root name taken", id(10), "lead", "", ErrNameTaken},
		{"unknown parent", id(10), "x", id(99), ErrUnknownParent},
		{"id exists", id(2), "fresh", id(1), ErrExists},
		{"bad id uppercase", strings.ToUpper(id(0xabc)), "x", "", ErrInvalidID},
		{"bad id short", "abc", "x", "", ErrInvalidID},
		{"dashed id not accepted by Add", "01234567-89ab-cdef-0123-456789abcdef", "x", "", ErrInvalidID},
		{"bad name", id(10), "9lives", id(1), ErrInvalidName},
		{"reserved name", id(10), "USER", "", ErrInvalidName},
	} {
		if err := tr.Add(tc.id, tc.name, tc.pa); !errors.Is(err, tc.want) {
			t.Errorf("%s: Add = %v, want %v", tc.desc, err, tc.want)
		}
	}
	// Allowed: same name in different subtrees, grandparent's name, cousin names.
	for _, tc := range []struct {
		desc         string
		id, name, pa string
	}{
		{"name used in another subtree", id(20), "helper", id(3)},
		{"grandparent's name", id(21), "lead", id(2)},
		{"root named like a non-root", id(22), "critic", ""},
	} {
		if err := tr.Add(tc.id, tc.name, tc.pa); err != nil {
			t.Errorf("%s: Add = %v, want ok", tc.desc, err)
		}
	}
	if tr.Len() != 10 {
		t.Errorf("Len = %d, want 10", tr.Len())
	}
}

func TestRemove(t *testing.T) {
	tr := fixture(t)
	if err := tr.Remove(id(2)); !errors.Is(err, ErrHasChildren) {
		t.Fatalf("Remove(non-leaf) = %v, want ErrHasChildren", err)
	}
	if err := tr.Remove(id(99)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Remove(unknown) = %v, want ErrNotFound", err)
	}
	if err := tr.Remove(id(4)); err != nil {
		t.Fatalf("Remove(leaf) = %v", err)
	}
	if err := tr.Remove(id(2)); err != nil {
		t.Fatalf("Remove(now leaf) = %v", err)
	}
	if _, ok := tr.Get(id(2)); ok {
		t.Fatal("removed agent still present")
	}
	if got, want := tr.Children(id(1)), []string{id(3), id(5)}; !slices.Equal(got, want) {
		t.Errorf("Children after remove = %v, want %v", got, want)
	}
	// The name is free again, and "worker" is no longer ambiguous.
	if got, err := tr.Resolve("worker"); err != nil || got != id(7) {
		t.Errorf("Resolve(worker) = %q, %v; want %s", got, err, id(7))
	}
	if err := tr.Add(id(30), "worker", id(1)); err != nil {
		t.Errorf("re-adding a removed name: %v", err)
	}
	// Removing a root.
	if err := tr.Remove(id(7)); err != nil {
		t.Fatal(err)
	}
	if err := tr.Remove(id(6)); err != nil {
		t.Fatal(err)
	}
	if got := tr.Roots(); !slices.Equal(got, []string{id(1)}) {
		t.Errorf("Roots = %v", got)
	}
	if tr.Len() != 4 {
		t.Errorf("Len = %d, want 4", tr.Len())
	}
}

func TestStructure(t *testing.T) {
	tr := fixture(t)
	n, ok := tr.Get(id(1))
	if !ok || n.Name != "lead" || n.ParentID != "" || !slices.Equal(n.Children, []string{id(2), id(3), id(5)}) {
		t.Fatalf("Get(lead) = %+v, %v", n, ok)
	}
	n.Children[0] = "mutated"
	if tr.Children(id(1))[0] != id(2) {
		t.Fatal("Get returned a shared Children slice")
	}
	if p, ok := tr.Parent(id(4)); !ok || p != id(2) {
		t.Errorf("Parent(helper) = %q, %v", p, ok)
	}
	if _, ok := tr.Parent(id(99)); ok {
		t.Error("Parent(unknown) ok")
	}
	if got := tr.Siblings(id(3)); !slices.Equal(got, []string{id(2), id(5)}) {
		t.Errorf("Siblings(critic) = %v", got)
	}
	if got := tr.Siblings(id(1)); got != nil {
		t.Errorf("Siblings(root) = %v, want none", got)
	}
	if got := tr.Siblings(id(4)); got != nil {
		t.Errorf("Siblings(only child) = %v, want none", got)
	}
	if got := tr.Roots(); !slices.Equal(got, []string{id(1), id(6)}) {
		t.Errorf("Roots = %v", got)
	}
	if got, want := tr.Subtree(id(1)), []string{id(1), id(2), id(4), id(3), id(5)}; !slices.Equal(got, want) {
		t.Errorf("Subtree(lead) = %v, want %v", got, want)
	}
	if got := tr.Subtree(id(99)); got != nil {
		t.Errorf("Subtree(unknown) = %v", got)
	}
	if got, want := tr.Walk(), []string{id(1), id(2), id(4), id(3), id(5), id(6), id(7)}; !slices.Equal(got, want) {
		t.Errorf("Walk = %v, want %v", got, want)
	}
	for in, want := range map[string]string{id(1): "lead", id(4): "lead/worker/helper", id(7): "other/worker", id(99): "", User: User, System: System} {
		if got := tr.Path(in); got != want {
			t.Errorf("Path(%s) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{id(2): "worker", User: User, System: System, "stranger": "stranger"} {
		if got := tr.DisplayName(in); got != want {
			t.Errorf("DisplayName(%s) = %q, want %q", in, got, want)
		}
	}
	if !tr.IsRoot(id(6)) || tr.IsRoot(id(7)) || tr.IsRoot(id(99)) {
		t.Error("IsRoot wrong")
	}
	if got, want := tr.Reachable(id(2)), []string{id(1), id(4), id(3), id(5)}; !slices.Equal(got, want) {
		t.Errorf("Reachable(worker) = %v, want %v", got, want)
	}
}

func TestZeroValueTree(t *testing.T) {
	var tr Tree
	if tr.Len() != 0 || len(tr.Walk()) != 0 || tr.Roots() != nil {
		t.Fatal("zero tree not empty")
	}
	if _, err := tr.Resolve("x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Resolve on zero tree = %v", err)
	}
	if err := tr.Add(id(1), "lead", ""); err != nil {
		t.Fatalf("Add on zero tree: %v", err)
	}
	if got, err := tr.Resolve("lead"); err != nil || got != id(1) {
		t.Fatalf("Resolve = %q, %v", got, err)
	}
}
