package daemon

import (
	"fmt"
	"testing"
)

// TestBug_RecoveryKeepsCreationOrder: the tree keeps roots and each agent's
// children in creation order (tree.Roots, tree.Children, BroadcastTargets,
// Walk and so agent.list), but recovery (placeTree) adds agents sorted by
// the last seq of their own logs, so after a restart an agent whose log grew
// comes after agents created later. Found by the model test.
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
