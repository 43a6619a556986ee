package tree

import (
	"errors"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	tr := fixture(t)
	// An agent whose name looks like another agent's id: names win over ids.
	if err := tr.Add(id(40), "f"+id(5)[1:], id(3)); err != nil {
		t.Fatal(err)
	}
	idLike := "f" + id(5)[1:] // "f000...05" is a valid name and a valid id shape
	dashed := id(3)[:8] + "-" + id(3)[8:12] + "-" + id(3)[12:16] + "-" + id(3)[16:20] + "-" + id(3)[20:]
	for _, tc := range []struct {
		ref, want string
		err       error
		msgHas    string
	}{
		{"lead", id(1), nil, ""},
		{"lead/worker", id(2), nil, ""},
		{"lead/worker/helper", id(4), nil, ""},
		{"other/worker", id(7), nil, ""},
		{"helper", id(4), nil, ""},
		{"critic", id(3), nil, ""},
		{id(5), id(5), nil, ""},
		{strings.ToUpper(id(5)), id(5), nil, ""},
		{dashed, id(3), nil, ""},
		{idLike, id(40), nil, ""}, // name beats id
		{"worker", "", ErrAmbiguous, "(/lead/worker, /other/worker); use one of these paths"},
		{"nobody", "", ErrNotFound, `"nobody"`},
		{"lead/nobody", "", ErrNotFound, `lead has no child named "nobody"`},
		{"worker/helper", "", ErrNotFound, `no root agent named "worker"`},
		{"lead//worker", "", ErrNotFound, "empty path element"},
		{"/lead", id(1), nil, ""},
		{"/lead/worker", id(2), nil, ""},
		{"//lead", "", ErrNotFound, "empty path element"},
		{"/", "", ErrNotFound, "empty path element"},
		{"lead/", "", ErrNotFound, "empty path element"},
		{id(99), "", ErrNotFound, id(99)},
		{"", "", ErrNotFound, "empty"},
		{User, "", ErrNotFound, "not an agent"},
		{System, "", ErrNotFound, "not an agent"},
	} {
		got, err := tr.Resolve(tc.ref)
		if tc.err == nil {
			if err != nil || got != tc.want {
				t.Errorf("Resolve(%q) = %q, %v; want %q", tc.ref, got, err, tc.want)
			}
			continue
		}
		if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.msgHas) {
			t.Errorf("Resolve(%q) error = %v; want %v containing %q", tc.ref, err, tc.err, tc.msgHas)
		}
	}
}

func TestResolveNameBeatsID(t *testing.T) {
	tr := New()
	// Agent A has id X; agent B is *named* X (X is a valid name: it starts with a letter).
	x := "abcdef0123456789abcdef0123456789"
	if err := tr.Add(x, "alpha", ""); err != nil {
		t.Fatal(err)
	}
	if err := tr.Add(id(2), x, ""); err != nil {
		t.Fatal(err)
	}
	if got, err := tr.Resolve(x); err != nil || got != id(2) {
		t.Fatalf("Resolve(%s) = %q, %v; want the agent named so (%s)", x, got, err, id(2))
	}
	// Once nobody has the name, the id form resolves.
	if err := tr.Remove(id(2)); err != nil {
		t.Fatal(err)
	}
	if got, err := tr.Resolve(x); err != nil || got != x {
		t.Fatalf("Resolve(%s) = %q, %v; want the id", x, got, err)
	}
}

func TestLookup(t *testing.T) {
	tr := fixture(t)
	// Make "critic" ambiguous in reach from worker(2): worker has a child
	// named critic too; the parent/children/siblings order decides.
	if err := tr.Add(id(41), "critic", id(2)); err != nil {
		t.Fatal(err)
	}
	if err := tr.Add(id(42), "lead", id(4)); err != nil { // helper's child named like the root
		t.Fatal(err)
	}
	for _, tc := range []struct {
		from       string
		name, want string
		msgHas     string
	}{
		{id(2), "lead", id(1), ""},                                 // parent
		{id(2), "helper", id(4), ""},                               // child
		{id(2), "tester", id(5), ""},                               // sibling
		{id(2), "critic", id(41), ""},                              // child wins over sibling
		{id(4), "worker", id(2), ""},                               // parent
		{id(4), "lead", id(42), ""},                                // child, not the grandparent root
		{id(1), "worker", id(2), ""},                               // child of a root
		{id(2), "USER", User, ""},                                  // the operator
		{id(4), "tester", "", `no reachable agent named "tester"`}, // uncle is two hops
		{id(1), "other", "", `no reachable agent named "other"`},   // roots have no siblings
		{id(2), "worker", "", `no reachable agent named "worker"`}, // self
		{id(99), "lead", "", "not in the tree"},
	} {
		got, err := tr.Lookup(tc.from, tc.name)
		if tc.msgHas == "" {
			if err != nil || got != tc.want {
				t.Errorf("Lookup(%s, %q) = %q, %v; want %q", tr.Path(tc.from), tc.name, got, err, tc.want)
			}
			continue
		}
		if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), tc.msgHas) {
			t.Errorf("Lookup(%s, %q) error = %v; want ErrNotFound containing %q", tr.Path(tc.from), tc.name, err, tc.msgHas)
		}
	}
}

func TestChildByName(t *testing.T) {
	tr := fixture(t)
	if got, err := tr.ChildByName(id(1), "critic"); err != nil || got != id(3) {
		t.Errorf("ChildByName(lead, critic) = %q, %v", got, err)
	}
	for _, tc := range []struct{ parent, name, msgHas string }{
		{id(2), "critic", `no child agent named "critic"`}, // sibling, not a child
		{id(2), "lead", `no child agent named "lead"`},     // parent
		{id(1), "helper", `no child agent named "helper"`}, // grandchild
		{id(99), "x", "not in the tree"},
	} {
		_, err := tr.ChildByName(tc.parent, tc.name)
		if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), tc.msgHas) {
			t.Errorf("ChildByName(%s, %q) = %v; want ErrNotFound containing %q", tc.parent, tc.name, err, tc.msgHas)
		}
	}
}
