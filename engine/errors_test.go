package engine

import (
	"context"
	"errors"
	"testing"
)

// TestFailfKeepsChain: failf's error matches its condition and the %w
// cause, and reads as formatted.
func TestFailfKeepsChain(t *testing.T) {
	err := failf(ErrShuttingDown, "stopping: %w", context.Canceled)
	if !errors.Is(err, ErrShuttingDown) || !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Fatalf("chain lost: %v", err)
	}
	if errors.Is(err, ErrInvalid) {
		t.Fatal("matches a condition it does not hold")
	}
	if err.Error() != "stopping: context canceled" {
		t.Fatalf("text = %q", err.Error())
	}
}
