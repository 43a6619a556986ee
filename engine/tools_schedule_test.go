package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/tools"
)

// The tools of time and attention (tools_schedule.go).

func TestReminders(t *testing.T) {
	h := family(t, withFakeClock)
	w1 := idOf("w1")
	before := h.marks()
	res, _ := outside(t, h, w1, tools.ToolRemindMe, A{"reason": "check", "timeout": 90, "every": 60})
	wantReply(t, res, "")
	id, _ := res["reminder_id"].(string)
	want := `w1 reminder.scheduled {"reminder_id":"` + id + `","reason":"check","due":"` +
		clockStart.Add(90*time.Second).Format(time.RFC3339Nano) + `","every_ms":60000}`
	if effects := h.effects(before, w1); res["status"] != "scheduled" || len(effects) != 1 || effects[0] != want {
		t.Fatalf("result %v, logged %v, want [%s]", res, effects, want)
	}
	before = h.marks()
	res, _ = outside(t, h, w1, tools.ToolCancelReminder, A{"reminder_id": id})
	wantReply(t, res, "")
	if res["status"] != "cancelled" || res["reminder_id"] != id {
		t.Fatalf("cancel: %v", res)
	}
	if effects := h.effects(before, w1); eventsOf(effects) != "w1 "+schema.ReminderCancel || !strings.Contains(effects[0], id) {
		t.Fatalf("cancel logged %v", effects)
	}
	res, _ = outside(t, h, w1, tools.ToolCancelReminder, A{"reminder_id": id})
	wantReply(t, res, "unknown or already-fired reminder: "+id)
	// Another agent's reminder is unknown to the caller.
	res, _ = outside(t, h, idOf("w2"), tools.ToolRemindMe, A{"reason": "x", "timeout": 1})
	before = h.marks()
	res, _ = outside(t, h, w1, tools.ToolCancelReminder, A{"reminder_id": res["reminder_id"]})
	wantReply(t, res, "unknown or already-fired reminder")
	if effects := h.effects(before, w1); len(effects) != 0 {
		t.Fatalf("a refused cancel logged %v", effects)
	}
}

func TestSubscriptions(t *testing.T) {
	cases := []struct {
		name, from, target, transition string
		setup                          func(t *testing.T, h *harness)
		want                           string
	}{
		{name: "a child", from: "lead", target: "w1", transition: "busy->idle"},
		{name: "the parent", from: "w1", target: "lead", transition: "*->terminated"},
		{name: "a sibling", from: "w1", target: "w2", transition: "idle->*"},
		{name: "two hops away", from: "lead", target: "w1a", transition: "busy->idle", want: `no reachable agent named "w1a"`},
		// The engine drops a terminated agent from the tree, so the name no
		// longer resolves (toolexec's fake kept it and answered "agent
		// \"w1\" is terminated").
		{name: "a terminated agent", from: "lead", target: "w1", transition: "busy->idle", want: `no reachable agent named "w1"`,
			setup: func(t *testing.T, h *harness) {
				if _, err := h.c.TerminateTree(context.Background(), idOf("w1")); err != nil {
					t.Fatal(err)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := family(t)
			if tc.setup != nil {
				tc.setup(t, h)
			}
			from := idOf(tc.from)
			before := h.marks()
			res, _ := outside(t, h, from, tools.ToolSubscribe, A{"agent_name": tc.target, "transition": tc.transition, "once": true})
			wantReply(t, res, tc.want)
			effects := h.effects(before, from)
			if tc.want != "" {
				if len(effects) != 0 {
					t.Fatalf("a refused subscribe logged %v", effects)
				}
				return
			}
			id, _ := res["subscription_id"].(string)
			f, to, _ := strings.Cut(tc.transition, "->")
			want := tc.from + ` tool.subscribe {"subscription_id":"` + id + `","target_id":"` + tc.target + `","from":"` + f + `","to":"` + to + `","once":true}`
			if res["status"] != "active" || len(effects) != 1 || effects[0] != want {
				t.Fatalf("result %v, logged %v, want [%s]", res, effects, want)
			}
			before = h.marks()
			res, _ = outside(t, h, from, tools.ToolUnsubscribe, A{"subscription_id": id})
			if effects := h.effects(before, from); res["status"] != "removed" || eventsOf(effects) != tc.from+" "+schema.ToolUnsubscribe ||
				!strings.Contains(effects[0], id) {
				t.Fatalf("unsubscribe: %v, logged %v", res, effects)
			}
			res, _ = outside(t, h, from, tools.ToolUnsubscribe, A{"subscription_id": id})
			wantReply(t, res, "unknown subscription: "+id)
		})
	}
}

func TestAwaitInput(t *testing.T) {
	t.Run("outside a turn", func(t *testing.T) {
		h := family(t)
		lead := idOf("lead")
		before := h.marks()
		res, _ := outside(t, h, lead, tools.ToolAwaitInput, A{"kind": "approval", "prompt": "ok?", "timeout": 60})
		wantReply(t, res, "await_input can only be called during a turn")
		if effects := h.effects(before, lead); len(effects) != 0 {
			t.Fatalf("logged %v", effects)
		}
	})
	t.Run("in a turn suspends the run", func(t *testing.T) {
		h := family(t, withFakeClock)
		lead := idOf("lead")
		run := h.handTurn(lead, "run1")
		before := h.marks()
		_, err := run.tools.CallTool(t.Context(), tools.ToolAwaitInput, A{"kind": "approval", "prompt": "ok?", "timeout": 60})
		if !errors.Is(err, provider.ErrRunSuspended) {
			t.Fatalf("err %v, want ErrRunSuspended", err)
		}
		effects := h.effects(before, "")
		if eventsOf(effects) != "lead run.waiting,lead token.minted" {
			t.Fatalf("logged %v, want the run's wait (run.waiting, token.minted) and no tool.call", effects)
		}
		var w schema.RunWaitingData
		noErr(t, jsonInto(strings.SplitN(effects[0], " ", 3)[2], &w))
		if w.RunID != "run1" || w.Turn != run.plan.Turn || w.WaitKind != "approval" || w.Prompt != "ok?" ||
			w.Deadline != clockStart.Add(time.Minute).Format(time.RFC3339Nano) {
			t.Fatalf("run.waiting %+v", w)
		}
		if res := run.end(err); res.Status != "suspended" {
			t.Fatalf("the turn ended %+v, want it suspended", res)
		}
	})
}
