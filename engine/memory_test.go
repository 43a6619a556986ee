package engine

import (
	"context"
	"fmt"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/provider/inproc"
	"path"
	"strings"
	"testing"
)

// Tests of memory bounded by design (issue 16): bounded inboxes, payloads
// read back from the log, paged agent.log and inspect, small session.json.

// pendingOf returns a copy of an agent's queued messages as the inbox
// holds them (payloads possibly not resident).
func (h *harness) pendingOf(id string) []inbox.Message {
	a, ok := h.c.agent(id)
	if !ok {
		h.t.Fatalf("no agent %s", id)
	}
	return pendingOf(a)
}

// TestInboxBytesLimitRefusesAndLosesNothing: sends past an inbox's byte
// limit are a clear tool error; every accepted message is still delivered,
// and once the inbox drains the sender can send again.
func TestInboxBytesLimitRefusesAndLosesNothing(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		h.noWake = true
		h.cfg.Limits.InboxBytes = 3 * 1000
	})
	root := h.create("root", "", "echo")
	kid := h.create("kid", root, "echo")
	text := strings.Repeat("x", 1000)
	var sent []string
	var refused map[string]any
	for i := 0; i < 5; i++ {
		res := h.tool(root, "send_message", map[string]any{"recipient": "kid", "text": fmt.Sprintf("%d%s", i, text[1:])})
		if e, ok := res["error"].(string); ok {
			refused = res
			if !strings.Contains(e, "inbox") || !strings.Contains(e, "limits.inbox_bytes") {
				t.Fatalf("refusal does not say which limit: %q", e)
			}
			continue
		}
		sent = append(sent, res["message_id"].(string))
	}
	if len(sent) != 3 || refused == nil {
		t.Fatalf("accepted %d messages of 1000 bytes under a 3000-byte limit (refusal %v), want 3", len(sent), refused)
	}
	// Nothing accepted is lost: check_inbox on the kid returns the three.
	got := h.tool(kid, "check_inbox", map[string]any{})
	msgs, _ := got["messages"].([]any)
	if len(msgs) != 3 {
		t.Fatalf("check_inbox returned %d messages, want the 3 accepted: %v", len(msgs), got)
	}
	for i, m := range msgs {
		mm := m.(map[string]any)
		if mm["message_id"] != sent[i] || len(mm["text"].(string)) != 1000 || !strings.HasPrefix(mm["text"].(string), fmt.Sprint(i)) {
			t.Fatalf("message %d = %.40v, want %s with its 1000-byte text", i, mm, sent[i])
		}
	}
	// The inbox has room again.
	if res := h.tool(root, "send_message", map[string]any{"recipient": "kid", "text": text}); res["error"] != nil {
		t.Fatalf("send after the inbox drained: %v", res)
	}
}

// TestPendingTotalLimit: the daemon-wide count limit refuses a send to any
// agent once all inboxes together are full.
func TestPendingTotalLimit(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		h.noWake = true
		h.cfg.Limits.PendingMessages = 4
	})
	root := h.create("root", "", "echo")
	h.create("a", root, "echo")
	h.create("b", root, "echo")
	for i := 0; i < 4; i++ {
		to := []string{"a", "b"}[i%2]
		if res := h.tool(root, "send_message", map[string]any{"recipient": to, "text": "hi"}); res["error"] != nil {
			t.Fatalf("send %d: %v", i, res)
		}
	}
	res := h.tool(root, "send_message", map[string]any{"recipient": "a", "text": "hi"})
	if e, _ := res["error"].(string); !strings.Contains(e, "limits.pending_messages") {
		t.Fatalf("the 5th pending message in the daemon: %v, want a pending_messages refusal", res)
	}
	if n := h.c.pending.Count(); n != 4 {
		t.Fatalf("pending total = %d, want 4", n)
	}
}

// TestLargePayloadsNotResident: a large pending message keeps only its
// envelope in memory, live and after a restart, and a turn still gets the
// whole text.
func TestLargePayloadsNotResident(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.noWake = true })
	root := h.create("root", "", "echo")
	kid := h.create("kid", root, "echo")
	big := strings.Repeat("b", 200_000)
	h.tool(root, "send_message", map[string]any{"recipient": "kid", "text": big})
	h.tool(root, "send_message", map[string]any{"recipient": "kid", "text": "small"})
	check := func(when string) {
		t.Helper()
		q := h.pendingOf(kid)
		if len(q) != 2 {
			t.Fatalf("%s: %d pending, want 2", when, len(q))
		}
		if !q[0].Spilled() || q[0].Payload != "" || q[0].Size() != len(big) {
			t.Fatalf("%s: the 200 KB message is resident (payload %d bytes, spilled %v)", when, len(q[0].Payload), q[0].Spilled())
		}
		if q[1].Spilled() || q[1].Payload != "small" {
			t.Fatalf("%s: the small message = %+v", when, q[1])
		}
	}
	check("live")
	h.restart()
	check("after a restart")
	h.crash(faultfs.ProcessCrash)
	check("after a crash")
	// Inspect shows the whole text, read back from the log.
	m, err := h.c.Inspect(context.Background(), kid)
	if err != nil {
		t.Fatal(err)
	}
	if in := m.Inbox; len(in) != 2 || in[0].Text != big {
		t.Fatalf("inspect inbox does not carry the text back")
	}
	// A wake turn's prompt carries it too.
	var prompt string
	h.prov.Register("rec", func(_ context.Context, tn *inproc.Turn) (string, error) {
		prompt = tn.Prompt
		return "ok", nil
	})
	h.c.opts.NoWake = false
	a, _ := h.c.agent(kid)
	a.View(func(p *projection, _ liveFlags) { p.Model = "rec" }) // under the agent's lock
	h.c.wake(a)
	h.quiet()
	if !strings.Contains(prompt, big) || !strings.Contains(prompt, "small") {
		t.Fatalf("the wake prompt (%d bytes) lacks the messages", len(prompt))
	}
	if n := len(h.pendingOf(kid)); n != 0 {
		t.Fatalf("%d messages still pending after the turn", n)
	}
}

// TestAgentLogPagingEachEntryOnce: paging through agent.log with
// next_seq returns every entry exactly once, in order, also when entries
// are large enough for the byte budget to cut pages.
func TestAgentLogPagingEachEntryOnce(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.noWake = true })
	root := h.create("root", "", "echo")
	h.create("kid", root, "echo")
	for i := 0; i < 30; i++ {
		text := fmt.Sprint(i)
		if i%10 == 9 {
			text = strings.Repeat("L", 1<<20) // 1 MiB entries: pageBytes cuts pages
		}
		h.tool(root, "send_message", map[string]any{"recipient": "kid", "text": text})
	}
	all := h.entries(root)
	for _, limit := range []int{1, 7, 200} {
		var got []uint64
		since := uint64(0)
		for pages := 0; ; pages++ {
			if pages > len(all)+1 {
				t.Fatalf("limit %d: paging does not end", limit)
			}
			page, more, err := h.c.LogPage(context.Background(), root, since+1, limit)
			if err != nil {
				t.Fatal(err)
			}
			if len(page) > limit {
				t.Fatalf("limit %d: a page of %d entries", limit, len(page))
			}
			for _, e := range page {
				got = append(got, e.Seq)
				since = e.Seq
			}
			if !more {
				break
			}
		}
		if len(got) != len(all) {
			t.Fatalf("limit %d: %d entries over all pages, want %d", limit, len(got), len(all))
		}
		for i, s := range got {
			if s != all[i].Seq {
				t.Fatalf("limit %d: entry %d has seq %d, want %d (each entry once, in order)", limit, i, s, all[i].Seq)
			}
		}
	}
}

// TestInspectInboxPaged: agent.inspect shows one page of the inbox and the
// since_seq of the next; following them shows each message once.
func TestInspectInboxPaged(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.noWake = true })
	root := h.create("root", "", "echo")
	kid := h.create("kid", root, "echo")
	for i := 0; i < 25; i++ {
		h.tool(root, "send_message", map[string]any{"recipient": "kid", "text": fmt.Sprint(i)})
	}
	var texts []string
	since := uint64(0)
	for pages := 0; pages < 10; pages++ {
		d, err := h.c.InspectPage(context.Background(), kid, since, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range d.Inbox {
			texts = append(texts, it.Text)
		}
		if !d.HasMore {
			break
		}
		since = d.InboxNextSeq
	}
	if len(texts) != 25 {
		t.Fatalf("pages showed %d messages, want 25: %v", len(texts), texts)
	}
	for i, s := range texts {
		if s != fmt.Sprint(i) {
			t.Fatalf("message %d = %q (each once, in order)", i, s)
		}
	}
	m, _ := h.c.Inspect(context.Background(), kid)
	if n := len(m.Inbox); n != 25 {
		t.Fatalf("the default page shows %d of 25", n)
	}
}

// TestSessionJSONDoesNotGrowWithHistory: evicting an agent after more and
// more turns leaves session.json the same size (the blob is a handle, the
// history stays in the log), and the restored session still has its whole
// history.
func TestSessionJSONDoesNotGrowWithHistory(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		h.saveDelay = -1
		h.prov = inproc.New("inproc", inproc.Options{})
	})
	var seen int
	h.prov.Register("hist", func(_ context.Context, tn *inproc.Turn) (string, error) {
		seen = len(tn.History)
		return strings.Repeat("r", 50_000), nil
	})
	id := h.create("a", "", "hist")
	sessPath := path.Join("/home/agents", id, "session.json")
	var sizes []int
	for i := 0; i < 4; i++ {
		h.send(id, strings.Repeat("p", 50_000))
		if err := h.c.Evict(context.Background(), id); err != nil {
			t.Fatalf("evict: %v", err)
		}
		sizes = append(sizes, len(h.read(sessPath)))
	}
	// Timestamps in session.json vary by a few bytes (RFC 3339 drops
	// trailing zeros of the fraction); each turn adds 100 KB of history.
	for _, s := range sizes {
		if s > 2048 || s > sizes[0]+32 {
			t.Fatalf("session.json sizes after 1..4 turns of 100 KB: %v; it must not grow with the history", sizes)
		}
	}
	h.send(id, "again")
	if seen != 4 {
		t.Fatalf("the restored session saw %d turns of history, want 4", seen)
	}
}

// TestInstructionsAndMetadataLimits: instructions and metadata over the
// message limit are refused at create and at set_agent_metadata.
func TestInstructionsAndMetadataLimits(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		h.noWake = true
		h.cfg.Limits.MessageBytes = 100
	})
	long := strings.Repeat("i", 101)
	if _, err := h.c.CreateAgent(context.Background(), CreateSpec{Name: "x", Instructions: long}); err == nil || !strings.Contains(err.Error(), "limits.message_bytes") {
		t.Fatalf("create with 101-byte instructions: %v", err)
	}
	if _, err := h.c.CreateAgent(context.Background(), CreateSpec{Name: "y", Metadata: map[string]string{"k": long}}); err == nil || !strings.Contains(err.Error(), "metadata") {
		t.Fatalf("create with 101 bytes of metadata: %v", err)
	}
	root := h.create("root", "", "echo")
	h.create("kid", root, "echo")
	for i := 0; i < 2; i++ {
		if res := h.tool(root, "set_agent_metadata", map[string]any{"agent_name": "kid", "key": fmt.Sprint("k", i), "value": strings.Repeat("v", 40)}); res["error"] != nil {
			t.Fatalf("set %d: %v", i, res)
		}
	}
	res := h.tool(root, "set_agent_metadata", map[string]any{"agent_name": "kid", "key": "k2", "value": strings.Repeat("v", 40)})
	if e, _ := res["error"].(string); !strings.Contains(e, "limits.message_bytes") {
		t.Fatalf("metadata past the limit in total: %v", res)
	}
	res = h.tool(root, "spawn_agent", map[string]any{"name": "big", "instructions": strings.Repeat("i", 90), "metadata": map[string]any{"a": strings.Repeat("m", 100)}})
	if e, _ := res["error"].(string); !strings.Contains(e, "metadata") {
		t.Fatalf("spawn with 101 bytes of metadata: %v", res)
	}
}
