package worker

import (
	"testing"

	"github.com/warren-dev/warren/provider/remote"
)

// TestCopyStderrNeverWaits: a worker whose stderr queue is full (nothing
// sends: the connection stalled) drops and counts chunks instead of
// blocking the agent's process; an agent with no session sends nothing;
// a large write is cut into chunks of at most remote.StderrChunkMax.
func TestCopyStderrNeverWaits(t *testing.T) {
	w := &Worker{fwd: map[string]string{}, stderrQ: make(chan stderrChunk, stderrQueue)}
	w.copyStderr("a", []byte("no session: not queued"))
	if len(w.stderrQ) != 0 {
		t.Fatalf("%d chunks queued for an agent without a session", len(w.stderrQ))
	}
	w.forward("a", "warren.stderr.d.s")
	big := make([]byte, 2*remote.StderrChunkMax+1)
	w.copyStderr("a", big)
	if n := len(w.stderrQ); n != 3 {
		t.Fatalf("a write of %d bytes made %d chunks, want 3", len(big), n)
	}
	for range stderrQueue {
		w.copyStderr("a", []byte("x")) // returns although the queue fills
	}
	if got, want := w.stderrDropped.Load(), int64(3); got != want {
		t.Fatalf("dropped %d chunks, want %d", got, want)
	}
	w.unforward("a", "warren.stderr.d.other") // a stale session's end leaves the newer route
	if w.fwd["a"] != "warren.stderr.d.s" {
		t.Fatalf("an older session's end removed the route: %q", w.fwd["a"])
	}
	w.unforward("a", "warren.stderr.d.s")
	if w.fwd["a"] != "" {
		t.Fatal("the route stayed after its session ended")
	}
}
