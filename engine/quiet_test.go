package engine

import (
	"context"
	"errors"
	"testing"

	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/schema"
)

// TestQuietIncludesATurnsAftermath: a wake turn's aftermath runs after
// the agent stops being busy (here: the SYSTEM notice of its failure to
// its parent). The harness's quiescence must not be reached before it has
// landed, or every test that reads state after h.quiet() can read it too
// early (the shape of TestSubscriptionsFireOnEveryTransitionIncludingIdleToBusy's
// old flake, and of the model test's observation after each command).
func TestQuietIncludesATurnsAftermath(t *testing.T) {
	hold := newHoldFS()
	defer hold.let()
	h := newHarness(t, func(h *harness) {
		h.wrapFS = func(fsys faultfs.FS) faultfs.FS { hold.FS = fsys; return hold }
	})
	proceed := make(chan struct{})
	h.prov.Register("fragile", func(ctx context.Context, _ *inproc.Turn) (string, error) {
		<-proceed
		return "", errors.New("boom")
	})
	h.prov.Register("quiet", inproc.Reply("noted"))
	root := h.create("root", "", "quiet")
	kid := h.create("kid", root, "fragile")
	h.tool(root, "send_message", map[string]any{"recipient": "kid", "text": "job"})
	hold.arm(root + "/events.jsonl") // the failure notice's write to the parent
	close(proceed)
	<-hold.entered // the kid's turn failed; its notice is being written
	if h.isQuiet() {
		t.Fatal("quiet while the failed turn's notice to the parent is still being written")
	}
	hold.let()
	h.quiet()
	notices := 0
	for _, e := range h.entries(root) {
		if e.Event == schema.MessageEnqueued && dataOf(t, e)["kind"] == "error" {
			notices++
		}
	}
	if notices != 1 || h.count(kid, schema.TurnFailed) != 1 {
		t.Fatalf("after quiet: %d failure notices in the parent's log, want 1", notices)
	}
}
