package agentproc

import (
	"fmt"
	"testing"
)

func TestRingKeepsTail(t *testing.T) {
	r := NewTail(16)
	if _, err := fmt.Fprint(r, "line one\nline two\nline three\n"); err != nil {
		t.Fatal(err)
	}
	if got := r.String(); got != "...line three\n" {
		t.Fatalf("ring = %q", got)
	}
	small := NewTail(100)
	_, _ = small.Write([]byte("short"))
	if small.String() != "short" {
		t.Fatalf("ring = %q", small.String())
	}
}
