package domainerr

import (
	"context"
	"errors"
	"testing"
)

// New's error matches its condition, the conditions that condition is
// one of, and the %w cause, and reads as formatted.
func TestNewKeepsChain(t *testing.T) {
	err := New(ShuttingDown, "stopping: %w", context.Canceled)
	if !errors.Is(err, ShuttingDown) || !errors.Is(err, Unavailable) || !errors.Is(err, context.Canceled) {
		t.Fatalf("chain lost: %v", err)
	}
	if errors.Is(err, Invalid) {
		t.Fatal("matches a condition it does not hold")
	}
	if err.Error() != "stopping: context canceled" {
		t.Fatalf("text = %q", err.Error())
	}
}
