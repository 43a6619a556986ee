package engine

import (
	"context"
	"strings"
	"testing"
)

// TestTerminateRefusalCountsChildrenInEnglish: "1 child", "2 children".
func TestTerminateRefusalCountsChildrenInEnglish(t *testing.T) {
	h := newHarness(t)
	root := h.create("root", "", "echo")
	h.create("a", root, "echo")
	err := h.c.Terminate(context.Background(), root)
	if err == nil || !strings.Contains(err.Error(), "has 1 child; terminate it first") {
		t.Fatalf("terminate with one child: %v", err)
	}
	h.create("b", root, "echo")
	err = h.c.Terminate(context.Background(), root)
	if err == nil || !strings.Contains(err.Error(), "has 2 children; terminate them first") {
		t.Fatalf("terminate with two children: %v", err)
	}
}
