package tree

import (
	"fmt"
	"testing"
)

// benchTree builds a tree of 1+10+100+1000 agents (fan-out 10, depth 4).
func benchTree(b *testing.B) (*Tree, string) {
	b.Helper()
	tr := New()
	n := 0
	var add func(parent string, depth int, leaf *string)
	add = func(parent string, depth int, leaf *string) {
		for i := range 10 {
			n++
			cid := id(n)
			if err := tr.Add(cid, fmt.Sprintf("a%d_%d", depth, i), parent); err != nil {
				b.Fatal(err)
			}
			*leaf = cid
			if depth < 3 {
				add(cid, depth+1, leaf)
			}
		}
	}
	var leaf string
	if err := tr.Add(id(0), "root", ""); err != nil {
		b.Fatal(err)
	}
	add(id(0), 1, &leaf)
	return tr, leaf
}

func BenchmarkResolvePath(b *testing.B) {
	tr, _ := benchTree(b)
	for b.Loop() {
		if _, err := tr.Resolve("root/a1_9/a2_9/a3_9"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkResolveID(b *testing.B) {
	tr, leaf := benchTree(b)
	for b.Loop() {
		if _, err := tr.Resolve(leaf); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCheckRoute(b *testing.B) {
	tr, leaf := benchTree(b)
	parent, _ := tr.Parent(leaf)
	for b.Loop() {
		if err := tr.CheckRoute(leaf, parent); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLookup(b *testing.B) {
	tr, leaf := benchTree(b)
	for b.Loop() {
		if _, err := tr.Lookup(leaf, "a3_0"); err != nil {
			b.Fatal(err)
		}
	}
}
