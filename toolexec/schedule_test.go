package toolexec

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/tools"
)

func TestReminders(t *testing.T) {
	f := family()
	res, _ := outside(t, f, idOf("w1"), tools.ToolRemindMe, A{"reason": "check", "timeout": 90, "every": 60})
	wantReply(t, res, "")
	id, _ := res["reminder_id"].(string)
	want := "remind " + idOf("w1") + " " + id + ` "check" 2026-01-02T03:05:35Z 1m0s`
	if res["status"] != "scheduled" || len(f.effects) != 1 || f.effects[0] != want {
		t.Fatalf("result %v, effects %v, want [%s]", res, f.effects, want)
	}
	res, _ = outside(t, f, idOf("w1"), tools.ToolCancelReminder, A{"reminder_id": id})
	wantReply(t, res, "")
	if res["status"] != "cancelled" || res["reminder_id"] != id {
		t.Fatalf("cancel: %v", res)
	}
	res, _ = outside(t, f, idOf("w1"), tools.ToolCancelReminder, A{"reminder_id": id})
	wantReply(t, res, "unknown or already-fired reminder: "+id)
	// Another agent's reminder is unknown to the caller.
	res, _ = outside(t, f, idOf("w2"), tools.ToolRemindMe, A{"reason": "x", "timeout": 1})
	res, _ = outside(t, f, idOf("w1"), tools.ToolCancelReminder, A{"reminder_id": res["reminder_id"]})
	wantReply(t, res, "unknown or already-fired reminder")
}

func TestSubscriptions(t *testing.T) {
	cases := []struct {
		name, from, target, transition string
		setup                          func(f *fakeEnv)
		want                           string
	}{
		{name: "a child", from: "lead", target: "w1", transition: "busy->idle"},
		{name: "the parent", from: "w1", target: "lead", transition: "*->terminated"},
		{name: "a sibling", from: "w1", target: "w2", transition: "idle->*"},
		{name: "two hops away", from: "lead", target: "w1a", transition: "busy->idle", want: `no reachable agent named "w1a"`},
		{name: "a terminated agent", from: "lead", target: "w1", transition: "busy->idle", want: `agent "w1" is terminated`,
			setup: func(f *fakeEnv) { f.agents[idOf("w1")].State = tools.StateTerminated }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := family()
			if tc.setup != nil {
				tc.setup(f)
			}
			res, _ := outside(t, f, idOf(tc.from), tools.ToolSubscribe, A{"agent_name": tc.target, "transition": tc.transition, "once": true})
			wantReply(t, res, tc.want)
			if tc.want != "" {
				if len(f.effects) != 0 {
					t.Fatalf("a refused subscribe did %v", f.effects)
				}
				return
			}
			id, _ := res["subscription_id"].(string)
			from, to, _ := strings.Cut(tc.transition, "->")
			want := "subscribe " + idOf(tc.from) + " " + id + " " + idOf(tc.target) + " " + from + "->" + to + " true"
			if res["status"] != "active" || len(f.effects) != 1 || f.effects[0] != want {
				t.Fatalf("result %v, effects %v, want [%s]", res, f.effects, want)
			}
			res, _ = outside(t, f, idOf(tc.from), tools.ToolUnsubscribe, A{"subscription_id": id})
			if res["status"] != "removed" {
				t.Fatalf("unsubscribe: %v", res)
			}
			res, _ = outside(t, f, idOf(tc.from), tools.ToolUnsubscribe, A{"subscription_id": id})
			wantReply(t, res, "unknown subscription: "+id)
		})
	}
}

func TestAwaitInput(t *testing.T) {
	t.Run("outside a turn", func(t *testing.T) {
		f := family()
		res, _ := outside(t, f, idOf("lead"), tools.ToolAwaitInput, A{"kind": "approval", "prompt": "ok?", "timeout": 60})
		wantReply(t, res, "await_input can only be called during a turn")
		if len(f.effects) != 0 {
			t.Fatalf("effects %v", f.effects)
		}
	})
	t.Run("in a turn suspends the run", func(t *testing.T) {
		f := family()
		l := &memLog{}
		a := newAttempt(f, Caller{ID: idOf("lead"), Log: l}, "run1", 4, nil, nil)
		_, err := a.CallTool(t.Context(), tools.ToolAwaitInput, A{"kind": "approval", "prompt": "ok?", "timeout": 60})
		if !errors.Is(err, provider.ErrRunSuspended) {
			t.Fatalf("err %v, want ErrRunSuspended", err)
		}
		if want := "await " + idOf("lead") + " approval " + time.Minute.String() + " run1 4"; len(f.effects) != 1 || f.effects[0] != want {
			t.Fatalf("effects %v, want [%s]", f.effects, want)
		}
		if n := len(l.records()); n != 0 {
			t.Fatalf("a suspending call logged %d tool.call entries; the run's wait is its record", n)
		}
	})
}
