package engine

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/schedule"
)

// callTool runs a tool as an agent outside a turn and returns the result.
func (h *harness) tool(id, name string, args map[string]any) map[string]any {
	h.t.Helper()
	r, err := h.c.CallTool(context.Background(), id, name, args)
	if err != nil {
		h.t.Fatalf("%s: %v", name, err)
	}
	return r
}

func TestToolErrorsAreResults(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.noWake = true })
	root := h.create("root", "", "echo")
	h.create("kid", root, "echo")
	cases := []struct {
		tool string
		args map[string]any
		want string
	}{
		{"no_such_tool", nil, "unknown tool"},
		{"send_message", map[string]any{"recipient": "kid"}, "text"},
		{"send_message", map[string]any{"recipient": "kid", "text": 7}, "text"},
		{"send_message", map[string]any{"recipient": "ghost", "text": "x"}, "ghost"},
		{"send_message", map[string]any{"recipient": "root", "text": "x"}, "no reachable agent"},
		{"spawn_agent", map[string]any{"name": "bad/name", "instructions": "x"}, "name"},
		{"spawn_agent", map[string]any{"name": "kid", "instructions": "x"}, "taken"},
		{"complete", map[string]any{"result": "x"}, "root agent cannot complete"},
		{"broadcast", map[string]any{"text": "x"}, "siblings"},
		{"poke", map[string]any{"agent_name": "ghost"}, "ghost"},
		{"cancel_reminder", map[string]any{"reminder_id": "nope"}, "unknown or already-fired reminder"},
		{"permit_turn", map[string]any{"agent_name": "kid"}, "not gated"},
		{"subscribe", map[string]any{"agent_name": "kid", "transition": "idle-busy"}, "transition"},
		{"await_input", map[string]any{"kind": "q", "prompt": "?", "timeout": 5}, "during a turn"},
	}
	for _, tc := range cases {
		r := h.tool(root, tc.tool, tc.args)
		msg, _ := r["error"].(string)
		if !strings.Contains(msg, tc.want) {
			t.Errorf("%s %v: result %v, want an error mentioning %q", tc.tool, tc.args, r, tc.want)
		}
	}
	if n := h.count(root, "tool.call"); n != len(cases) {
		t.Fatalf("tool.call logged %d times, want every call (%d) logged", n, len(cases))
	}
}

func TestMessageArrivingDuringATurnWaitsForTheNext(t *testing.T) {
	h := newHarness(t)
	started := make(chan *inproc.Turn, 4)
	release := make(chan struct{})
	var prompts []string
	var mu sync.Mutex
	h.prov.Register("worker", func(ctx context.Context, tr *inproc.Turn) (string, error) {
		mu.Lock()
		prompts = append(prompts, tr.Prompt)
		first := len(prompts) == 1
		mu.Unlock()
		if first {
			started <- tr
			<-release
		}
		return "ok", nil
	})
	root := h.create("root", "", "echo")
	kid := h.create("kid", root, "worker")
	h.tool(root, "send_message", map[string]any{"recipient": "kid", "text": "one"})
	<-started
	h.tool(root, "send_message", map[string]any{"recipient": "kid", "text": "two"})
	close(release)
	h.until("kid ran two turns", func() bool { return h.count(kid, "turn.complete") == 2 })
	h.quiet()
	mu.Lock()
	defer mu.Unlock()
	if len(prompts) != 2 || prompts[0] != "Message from root:\none" || prompts[1] != "Message from root:\ntwo" {
		t.Fatalf("prompts = %q: a message that arrives mid-turn must wait for the next turn, never be dropped", prompts)
	}
}

func TestFailedChildNotifiesParentAndPokeRetries(t *testing.T) {
	h := newHarness(t)
	fail := true
	var mu sync.Mutex
	h.prov.Register("fragile", func(ctx context.Context, tr *inproc.Turn) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			return "", fmt.Errorf("boom")
		}
		return "fine: " + tr.Prompt, nil
	})
	h.prov.Register("quiet", inproc.Reply("noted"))
	root := h.create("root", "", "quiet")
	kid := h.create("kid", root, "fragile")
	h.tool(root, "send_message", map[string]any{"recipient": "kid", "text": "job"})
	h.until("the parent got the failure notice", func() bool {
		for _, e := range h.entries(root) {
			if e.Event == "message.enqueued" && dataOf(t, e)["kind"] == "error" {
				return true
			}
		}
		return false
	})
	h.quiet()
	k, _ := h.c.agent(kid)
	if n := pendingLen(k); n != 1 {
		t.Fatalf("the failed child's inbox must be kept; pending = %d", n)
	}
	var notice string
	for _, e := range h.entries(root) {
		if e.Event == "message.enqueued" && dataOf(t, e)["kind"] == "error" {
			notice = dataOf(t, e)["payload"].(string)
		}
	}
	if !strings.Contains(notice, "kid") || !strings.Contains(notice, "job") || !strings.Contains(notice, "poke") {
		t.Fatalf("notice = %q", notice)
	}
	mu.Lock()
	fail = false
	mu.Unlock()
	h.tool(root, "poke", map[string]any{"agent_name": "kid"})
	h.until("the poked child processed its message", func() bool { return h.count(kid, "turn.complete") == 1 })
	h.quiet()
	if n := pendingLen(k); n != 0 {
		t.Fatalf("pending after poke = %d", n)
	}
}

func TestGateHoldsTurnsUntilPermitOrUngate(t *testing.T) {
	h := newHarness(t)
	root := h.create("root", "", "echo")
	kid := h.create("kid", root, "echo")
	h.tool(root, "gate", map[string]any{"agent_name": "kid"})
	h.tool(root, "send_message", map[string]any{"recipient": "kid", "text": "a"})
	h.quiet()
	if n := h.count(kid, "turn.start"); n != 0 {
		t.Fatalf("a gated agent ran %d turns", n)
	}
	h.tool(root, "permit_turn", map[string]any{"agent_name": "kid"})
	h.until("one permitted turn", func() bool { return h.count(kid, "turn.complete") == 1 })
	h.tool(root, "send_message", map[string]any{"recipient": "kid", "text": "b"})
	h.quiet()
	if n := h.count(kid, "turn.start"); n != 1 {
		t.Fatalf("permit_turn allows one turn; ran %d", n)
	}
	// The gate survives a restart.
	h.restart()
	h.quiet()
	if n := h.count(kid, "turn.start"); n != 1 {
		t.Fatalf("gate lost on restart: %d turns", n)
	}
	h.tool(root, "ungate", map[string]any{"agent_name": "kid"})
	h.until("ungated turn", func() bool { return h.count(kid, "turn.complete") == 2 })
}

func TestSubscriptionsFireOnEveryTransitionIncludingIdleToBusy(t *testing.T) {
	h := newHarness(t)
	h.prov.Register("quiet", inproc.Reply("noted"))
	root := h.create("root", "", "quiet")
	kid := h.create("kid", root, "echo")
	r := h.tool(root, "subscribe", map[string]any{"agent_name": "kid", "transition": "*->*"})
	if r["status"] != "active" {
		t.Fatalf("subscribe = %v", r)
	}
	h.tool(root, "send_message", map[string]any{"recipient": "kid", "text": "go"})
	// Wait for the notices themselves, not for quiet: the busy -> idle
	// notice is written after the kid's turn.complete, and a quiet check
	// could read root's log before it landed (flaked 1-3% under load).
	notices := func() []string {
		var seen []string
		for _, e := range h.entries(root) {
			if e.Event == "message.enqueued" {
				if p := dataOf(t, e)["payload"].(string); strings.HasPrefix(p, "[state]") {
					seen = append(seen, p)
				}
			}
		}
		return seen
	}
	h.until("both notices of the kid's turn", func() bool {
		joined := strings.Join(notices(), "|")
		return strings.Contains(joined, "kid: idle -> busy") && strings.Contains(joined, "kid: busy -> idle")
	})
	if n := h.count(kid, "turn.complete"); n != 1 {
		t.Fatalf("kid completed %d turns, want 1", n)
	}
	// Subscriptions survive a restart.
	h.restart()
	h.tool(root, "send_message", map[string]any{"recipient": "kid", "text": "again"})
	h.until("a notice after the restart", func() bool {
		n := 0
		for _, e := range h.entries(root) {
			if e.Event == "message.enqueued" && strings.Contains(dataOf(t, e)["payload"].(string), "idle -> busy") {
				n++
			}
		}
		return n == 2
	})
}

// TestRemindersFireRepeatCancelAndSurviveRestart runs on the fake clock:
// a repeating reminder fires once per period (and not before), again
// after a restart, never after cancel_reminder; a one-shot fires once.
func TestRemindersFireRepeatCancelAndSurviveRestart(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		h.noWake = true
		h.clock = schedule.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	})
	root := h.create("root", "", "echo")
	r := h.tool(root, "remind_me", map[string]any{"reason": "check build", "timeout": 0.05, "every": 0.05})
	rid := r["reminder_id"].(string)
	count := func(prefix string) int {
		n := 0
		for _, e := range h.entries(root) {
			if e.Event == "message.enqueued" && strings.HasPrefix(dataOf(t, e)["payload"].(string), prefix) {
				n++
			}
		}
		return n
	}
	want := func(what, prefix string, n int) {
		t.Helper()
		if got := count(prefix); got != n {
			t.Fatalf("%s: %d notices %q, want %d", what, got, prefix, n)
		}
	}
	h.clock.Advance(49 * time.Millisecond)
	want("before it is due", "Reminder: check build", 0)
	h.clock.Advance(time.Millisecond)
	want("at its due time", "Reminder: check build", 1)
	h.clock.Advance(50 * time.Millisecond)
	want("one period later", "Reminder: check build", 2)
	h.restart()
	h.clock.Advance(50 * time.Millisecond)
	want("one period after a restart", "Reminder: check build", 3)
	h.tool(root, "cancel_reminder", map[string]any{"reminder_id": rid})
	r = h.tool(root, "remind_me", map[string]any{"reason": "marker", "timeout": 0.1})
	h.clock.Advance(time.Second)
	want("a one-shot reminder", "Reminder: marker", 1)
	want("a cancelled reminder", "Reminder: check build", 3)
	if res := h.tool(root, "cancel_reminder", map[string]any{"reminder_id": r["reminder_id"]}); res["error"] == nil {
		t.Fatalf("cancelling a fired one-shot reminder must fail: %v", res)
	}
}

func TestCompleteSendsResultAndTerminatesAfterTurn(t *testing.T) {
	h := newHarness(t)
	h.prov.Register("quiet", inproc.Reply("noted"))
	h.prov.Register("finisher", func(ctx context.Context, tr *inproc.Turn) (string, error) {
		r, err := tr.Call("complete", map[string]any{"result": "42"})
		return "done", errOf(r, err)
	})
	root := h.create("root", "", "quiet")
	kid := h.create("kid", root, "finisher")
	h.tool(root, "send_message", map[string]any{"recipient": "kid", "text": "compute"})
	h.until("the kid is gone", func() bool { _, ok := h.c.agent(kid); return !ok })
	h.quiet()
	var got []string
	for _, e := range h.entries(root) {
		if e.Event == "message.enqueued" {
			d := dataOf(t, e)
			got = append(got, fmt.Sprint(d["kind"], ":", d["payload"]))
		}
	}
	if fmt.Sprint(got) != "[response:42]" {
		t.Fatalf("root received %v", got)
	}
	if len(h.c.tree.Children(root)) != 0 {
		t.Fatalf("the completed child is still in the tree")
	}
	h.restart()
	if _, ok := h.c.agent(kid); ok {
		t.Fatalf("a terminated agent came back after restart")
	}
}

func TestBroadcastReachesEachSiblingOnce(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.noWake = true })
	root := h.create("root", "", "echo")
	var kids []string
	for i := 0; i < 4; i++ {
		kids = append(kids, h.create(fmt.Sprintf("k%d", i), root, "echo"))
	}
	r := h.tool(kids[0], "broadcast", map[string]any{"text": "hello all"})
	if r["recipient_count"] != 3 {
		t.Fatalf("broadcast = %v", r)
	}
	for i, k := range kids {
		want := 1
		if i == 0 {
			want = 0
		}
		if n := h.count(k, "message.enqueued"); n != want {
			t.Fatalf("sibling %d got %d copies", i, n)
		}
	}
}

func TestMessageStormIsBounded(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.noWake = true })
	cfg := h.c.config()
	cfg.Limits.InboxMessages = 5
	h.c.ApplyConfig(cfg)
	root := h.create("root", "", "echo")
	h.create("kid", root, "echo")
	var last map[string]any
	for i := 0; i < 8; i++ {
		last = h.tool(root, "send_message", map[string]any{"recipient": "kid", "text": "spam"})
	}
	if msg, _ := last["error"].(string); !strings.Contains(msg, "inbox") {
		t.Fatalf("the 8th message to a full inbox: %v", last)
	}
}

func TestTerminateRules(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.noWake = true })
	root := h.create("root", "", "echo")
	kid := h.create("kid", root, "echo")
	if err := h.c.Terminate(context.Background(), root); err == nil || !strings.Contains(err.Error(), "terminate it first") {
		t.Fatalf("terminating a parent: %v", err)
	}
	if err := h.c.Terminate(context.Background(), kid); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Terminate(context.Background(), root); err != nil {
		t.Fatal(err)
	}
	if len(h.c.List()) != 0 {
		t.Fatalf("agents left: %v", h.c.List())
	}
	_ = time.Second
}
