package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/warren-dev/warren/config"
	"github.com/warren-dev/warren/inbox"
)

// The limits (limits.go): the limits in force, the room check's refusals,
// the agent text check and the payloads read back from the log. (These
// tests replace the former package limits'.)

func TestEffective(t *testing.T) {
	d := config.DefaultLimits()
	if got := (config.Limits{}).WithDefaults(); got != d {
		t.Fatalf("unset limits: %+v, want the defaults %+v", got, d)
	}
	got := config.Limits{InboxBytes: 7, MessageBytes: 9}.WithDefaults()
	if got.InboxBytes != 7 || got.MessageBytes != 9 || got.InboxMessages != d.InboxMessages || got.PendingBytes != d.PendingBytes {
		t.Fatalf("set limits kept, the others defaulted: %+v", got)
	}
}

// TestCheckRoom: each limit refuses with its own text, naming its setting,
// and wraps ErrInboxFull.
func TestCheckRoom(t *testing.T) {
	l := config.Limits{InboxMessages: 2, InboxBytes: 100, PendingMessages: 10, PendingBytes: 1000}
	if err := roomFor(l, "w1", 1, 50, 50, 9, 950); err != nil {
		t.Fatalf("at the edge: %v", err)
	}
	for _, c := range []struct {
		n       int
		b       int64
		size    int
		cnt, by int64
		want    string
	}{
		{2, 0, 1, 0, 0, "limits.inbox_messages"},
		{0, 100, 1, 0, 0, "limits.inbox_bytes"},
		{0, 0, 1, 10, 0, "limits.pending_messages"},
		{0, 0, 1, 0, 1000, "limits.pending_bytes"},
	} {
		err := roomFor(l, "w1", c.n, c.b, c.size, c.cnt, c.by)
		if !errors.Is(err, errInboxFull) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want inbox full naming %s", c, err, c.want)
		}
	}
}

// TestCheckAgentText: instructions, and metadata's keys and values
// together, are at most limits.message_bytes each.
func TestCheckAgentText(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.noWake, h.cfg.Limits.MessageBytes = true, 4 })
	if err := h.c.checkAgentText("abcd", map[string]string{"ab": "cd"}); err != nil {
		t.Fatal(err)
	}
	if err := h.c.checkAgentText("abcde", nil); err == nil || !strings.Contains(err.Error(), "instructions are 5 bytes") {
		t.Fatalf("long instructions: %v", err)
	}
	if err := h.c.checkAgentText("", map[string]string{"ab": "cde"}); err == nil || !strings.Contains(err.Error(), "metadata is 5 bytes") {
		t.Fatalf("large metadata: %v", err)
	}
}

// TestFillPayloads: a payload left in the log is read back from its line;
// a line that holds another message is an error, not a wrong payload.
func TestFillPayloads(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.noWake = true })
	root := h.create("root", "", "echo")
	kid := h.create("kid", root, "echo")
	payload := "the payload " + strings.Repeat("p", 2*residentPayload)
	mustEnqueue(t, h, mailMsg(h, "m1", root, kid, payload))
	ps := pendingOf(mustAgent(t, h.c, kid))
	if len(ps) != 1 || !ps[0].Spilled() || ps[0].Payload != "" {
		t.Fatalf("pending %+v; want m1 with its payload left in the log", ps)
	}
	got, err := h.c.fillPayloads(context.Background(), kid, ps)
	if err != nil || got[0].Payload != payload || got[0].ID != "m1" {
		t.Fatalf("filled %+v, %v", got, err)
	}
	other := ps[0]
	other.ID = "other"
	if _, err := h.c.fillPayloads(context.Background(), kid, []inbox.Message{other}); err == nil || !strings.Contains(err.Error(), "not other") {
		t.Fatalf("a line holding another message: %v", err)
	}
}

// The tree is at most limits.tree_depth deep: a create or a spawn that
// would go deeper is refused with the limit named; spawning from nearer
// the root works (issue 31, D5: a 3,000-deep chain made every listing
// quadratic).
func TestTreeDepthIsBounded(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.noWake = true; h.cfg.Limits.TreeDepth = 3 })
	a := h.create("a", "", "echo")
	b := h.create("b", a, "echo")
	c := h.create("c", b, "echo") // depth 3
	if _, err := h.c.CreateAgent(context.Background(), CreateSpec{Name: "d", ParentID: c, Provider: "inproc", Model: "echo"}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "limits.tree_depth") {
		t.Fatalf("create at depth 4 = %v, want refused naming limits.tree_depth", err)
	}
	r := h.tool(c, "spawn_agent", map[string]any{"name": "d", "instructions": "x"})
	if e, _ := r["error"].(string); !strings.Contains(e, "limits.tree_depth") {
		t.Fatalf("spawn at depth 4 = %v, want a tool error naming limits.tree_depth", r)
	}
	if r := h.tool(b, "spawn_agent", map[string]any{"name": "c2", "instructions": "x"}); r["error"] != nil {
		t.Fatalf("spawn at depth 3 refused: %v", r)
	}
}
