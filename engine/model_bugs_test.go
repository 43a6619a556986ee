package engine

import (
	"fmt"
	"testing"
)

// TestBug_RecoveryKeepsCreationOrder: the tree keeps roots and each agent's
// children in creation order (tree.Roots, tree.Children, BroadcastTargets,
// Walk and so agent.list). Recovery used to add agents sorted by the last
// seq of their own logs, so after a restart an agent whose log grew came
// after agents created later. Found by the model test; fixed in 7c707db
// (recovery orders by agent.created's timestamp); kept as a regression test.
func TestBug_RecoveryKeepsCreationOrder(t *testing.T) {
	h := newHarness(t)
	first := h.create("first", "", "echo")
	h.create("second", "", "echo")
	kid := h.create("kid1", first, "echo")
	h.create("kid2", first, "echo")
	h.send(first, "grow the log of the older root")
	h.send(kid, "grow the log of the older child")
	h.quiet()
	order := func() string {
		var paths []string
		for _, v := range h.c.List() {
			paths = append(paths, v.Path)
		}
		return fmt.Sprint(paths)
	}
	before := order()
	h.restart()
	h.quiet()
	if after := order(); after != before {
		t.Fatalf("agent order before a restart %s, after %s: recovery must keep roots and children in creation order", before, after)
	}
}
