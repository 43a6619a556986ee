package engine

import (
	"context"

	"fmt"
	"github.com/hashicorp/go-hclog"
	"strings"
	"testing"
)

// TestPendingPayloadsInMemoryAreBounded (issue 31, D11): past
// CoreOptions.PendingHeld, pending messages keep only their envelope, live
// and after a restart from checkpoints or from the whole log; what the
// agent is shown reads the payloads back, whole and in order.
func TestPendingPayloadsInMemoryAreBounded(t *testing.T) {
	for _, every := range []int{0, -1} { // from checkpoints, a full fold
		t.Run(fmt.Sprintf("checkpoints=%d", every), func(t *testing.T) {
			h := newHarness(t, func(h *harness) { h.pendingHeld, h.ckptEvery, h.noWake = 4<<10, every, true })
			root := h.create("root", "", "echo")
			kid := h.create("kid", root, "echo")
			ctx := context.Background()
			if _, err := h.c.CallTool(ctx, root, "gate", map[string]any{"agent_name": "kid"}); err != nil {
				t.Fatal(err)
			}
			var texts []string
			for i := 0; i < 40; i++ {
				text := fmt.Sprintf("%02d %s", i, strings.Repeat("p", 900))
				texts = append(texts, text)
				if _, err := h.c.CallTool(ctx, root, "send_message", map[string]any{"recipient": "kid", "text": text}); err != nil {
					t.Fatal(err)
				}
			}
			check := func(when string) {
				t.Helper()
				if held := h.c.pending.Held(); held > 4<<10 {
					t.Fatalf("%s: %d payload bytes held, over the 4 KiB bound", when, held)
				}
				msgs := pendingOf(mustAgent(t, h.c, kid))
				spilled := 0
				for _, m := range msgs {
					if m.Spilled() {
						spilled++
					}
				}
				if len(msgs) != 40 || spilled < 35 {
					t.Fatalf("%s: %d pending, %d without their payload; want 40, most of them spilled", when, len(msgs), spilled)
				}
				filled, err := h.c.fillPayloads(ctx, kid, msgs)
				if err != nil {
					t.Fatal(err)
				}
				for i, m := range filled {
					if m.Payload != texts[i] {
						t.Fatalf("%s: message %d reads back %.20q..., want %.20q...", when, i, m.Payload, texts[i])
					}
				}
			}
			check("live")
			h.restart()
			check("after a restart")
		})
	}
}

// TestHeldBoundMakesNoFalseCheckpointMismatch: messages kept without
// their payload for the memory bound go into checkpoints with their
// envelope; the scrub's fold keeps them whole; that is no disagreement
// (no refold, no warning).
func TestHeldBoundMakesNoFalseCheckpointMismatch(t *testing.T) {
	logs := &logBuf{}
	h := newHarness(t, func(h *harness) {
		h.pendingHeld, h.noWake = 2<<10, true
		h.logger = hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Warn})
	})
	root := h.create("root", "", "echo")
	h.create("kid", root, "echo")
	ctx := context.Background()
	if _, err := h.c.CallTool(ctx, root, "gate", map[string]any{"agent_name": "kid"}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if _, err := h.c.CallTool(ctx, root, "send_message", map[string]any{"recipient": "kid", "text": strings.Repeat("q", 800)}); err != nil {
			t.Fatal(err)
		}
	}
	h.restart()
	<-h.c.scrubbed
	if h.report.Resumed != 2 {
		t.Fatalf("%d agents recovered from checkpoints, want 2", h.report.Resumed)
	}
	if strings.Contains(logs.String(), "disagrees") {
		t.Fatalf("a checkpoint was found to disagree:\n%s", logs.String())
	}
}
