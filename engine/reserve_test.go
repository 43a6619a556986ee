package engine

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/tree"
)

// Sends in flight count toward the inbox limits (reserve.go): a message
// checked and not yet appended holds its room, so concurrent sends never
// take an inbox, or the daemon's totals, past a limit.

// checkedTwice checks two messages from sender to recipient before either
// is appended (what two concurrent tool calls do) and returns the second
// check's error.
func checkedTwice(t *testing.T, h *harness, sender, recipient string, size int) (first inbox.Message, err error) {
	t.Helper()
	text := strings.Repeat("x", size)
	m1 := h.c.newMessage(inbox.NewID(), sender, recipient, inbox.KindRequest, text)
	m2 := h.c.newMessage(inbox.NewID(), sender, recipient, inbox.KindRequest, text)
	if skip, err := h.c.checkSend(m1); err != nil || skip {
		t.Fatalf("first check: skip %v, %v; want room", skip, err)
	}
	_, err = h.c.checkSend(m2)
	return m1, err
}

// TestInFlightSendsCountTowardInboxLimits: with room for one message, of
// two sends checked before either is appended only the first passes, for
// each limit (count and bytes, per inbox and in total, and the USER
// inbox); once the first is appended it is counted in the inbox, not
// twice, and a message whose room was given back frees it.
func TestInFlightSendsCountTowardInboxLimits(t *testing.T) {
	cases := []struct {
		name  string
		set   func(h *harness)
		size  int
		toUsr bool
	}{
		{"inbox_messages", func(h *harness) { h.cfg.Limits.InboxMessages = 1 }, 10, false},
		{"inbox_bytes", func(h *harness) { h.cfg.Limits.InboxBytes = 1500 }, 1000, false},
		{"pending_messages", func(h *harness) { h.cfg.Limits.PendingMessages = 1 }, 10, false},
		{"pending_bytes", func(h *harness) { h.cfg.Limits.PendingBytes = 1500 }, 1000, false},
		{"user inbox_messages", func(h *harness) { h.cfg.Limits.InboxMessages = 1 }, 10, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, func(h *harness) {
				h.noWake = true
				tc.set(h)
			})
			root := h.create("root", "", "echo")
			kid := h.create("kid", root, "echo")
			to := kid
			if tc.toUsr {
				to = tree.User
			}
			first, err := checkedTwice(t, h, root, to, tc.size)
			if !errors.Is(err, errInboxFull) || !strings.Contains(err.Error(), "limits.") {
				t.Fatalf("second send checked while the first is in flight: %v; want an inbox-full error naming the limit", err)
			}
			if err := h.c.appendMessage(first, nil); err != nil {
				t.Fatal(err)
			}
			// Appended: counted once (in the inbox), so still full, and
			// the reservation of the second, refused, was never taken.
			m3 := h.c.newMessage(inbox.NewID(), root, to, inbox.KindRequest, strings.Repeat("y", tc.size))
			if _, err := h.c.checkSend(m3); !errors.Is(err, errInboxFull) {
				t.Fatalf("a send with the inbox full: %v; want inbox full", err)
			}
			left := h.c.resv.Len()
			if left != 0 {
				t.Fatalf("%d reservations left after the append; want none", left)
			}
		})
	}
	t.Run("given back", func(t *testing.T) {
		h := newHarness(t, func(h *harness) {
			h.noWake = true
			h.cfg.Limits.InboxMessages = 1
		})
		root := h.create("root", "", "echo")
		kid := h.create("kid", root, "echo")
		m := h.c.newMessage(inbox.NewID(), root, kid, inbox.KindRequest, "dropped")
		if _, err := h.c.checkSend(m); err != nil {
			t.Fatal(err)
		}
		h.c.unreserveAll([]inbox.Message{m})
		if res := h.tool(root, "send_message", map[string]any{"recipient": "kid", "text": "fits"}); res["error"] != nil {
			t.Fatalf("send after the room was given back: %v", res)
		}
	})
}

// TestConcurrentSendsNeverOvershootTheLimit: sixteen agents send to one
// inbox with room for four at the same time: exactly four are accepted,
// the rest are refused, and the inbox holds four; a refused broadcast
// holds no room afterwards.
func TestConcurrentSendsNeverOvershootTheLimit(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		h.noWake = true
		h.cfg.Limits.InboxMessages = 4
	})
	root := h.create("root", "", "echo")
	h.create("sink", root, "echo")
	var senders []string
	for i := 0; i < 16; i++ {
		senders = append(senders, h.create(fmt.Sprint("s", i), root, "echo"))
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	accepted := 0
	start := make(chan struct{})
	for _, s := range senders {
		wg.Add(1)
		go func(s string) {
			defer wg.Done()
			<-start
			res := h.tool(s, "send_message", map[string]any{"recipient": "sink", "text": "hello from " + s})
			if e, _ := res["error"].(string); e != "" && !strings.Contains(e, "limits.inbox_messages") {
				t.Errorf("send from %s: %v", s, e)
			} else if e == "" {
				mu.Lock()
				accepted++
				mu.Unlock()
			}
		}(s)
	}
	close(start)
	wg.Wait()
	sink, _ := h.c.Resolve("sink")
	if n := len(h.pendingOf(sink)); n != 4 || accepted != 4 {
		t.Fatalf("%d sends accepted, the inbox holds %d; want 4 and 4 (limit 4)", accepted, n)
	}
	left := h.c.resv.Len()
	if left != 0 {
		t.Fatalf("%d reservations left after every send ended; want none", left)
	}
	// A broadcast from root refused by the full sink gives back the room
	// it took in the other children's inboxes.
	if res := h.tool(root, "broadcast", map[string]any{"text": "to all"}); res["error"] == nil {
		t.Fatalf("broadcast with a full inbox among the children: %v; want refused", res)
	}
	left = h.c.resv.Len()
	if left != 0 {
		t.Fatalf("%d reservations left after a refused broadcast; want none", left)
	}
}
