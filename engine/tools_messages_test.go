package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/tools"
	"github.com/warren-dev/warren/tree"
)

// The message tools (tools_messages.go): send_message, broadcast,
// check_inbox and complete.

func TestSendMessage(t *testing.T) {
	cases := []struct {
		name, from, to string
		opts           func(h *harness)
		setup          func(t *testing.T, h *harness)
		want           string // error substring; "" = sent
	}{
		{name: "to a child", from: "lead", to: "w1"},
		{name: "to the parent", from: "w1", to: "lead"},
		{name: "to a sibling", from: "w1", to: "w2"},
		{name: "a root to USER", from: "lead", to: "USER"},
		{name: "a child to USER", from: "w1", to: "USER", want: "only root agents can message USER"},
		{name: "to a grandchild", from: "lead", to: "w1a", want: `no reachable agent named "w1a"`},
		{name: "to another root", from: "lead", to: "other", want: `no reachable agent named "other"`},
		{name: "to nobody", from: "lead", to: "ghost", want: `no reachable agent named "ghost"`},
		// The engine drops a terminated agent from the tree, so the route is
		// refused before the recipient is checked (toolexec's fake kept it
		// routable and refused it as "agent not found").
		{name: "to a terminated agent", from: "lead", to: "w1", want: `no reachable agent named "w1"`,
			setup: func(t *testing.T, h *harness) {
				if _, err := h.c.TerminateTree(context.Background(), idOf("w1")); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "to a full inbox", from: "lead", to: "w1", want: "inbox full",
			opts:  func(h *harness) { h.maxInbox = 1 },
			setup: func(t *testing.T, h *harness) { h.put("old", idOf("w2"), idOf("w1"), inbox.KindRequest, "old") }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var opts []func(*harness)
			if tc.opts != nil {
				opts = append(opts, tc.opts)
			}
			h := family(t, opts...)
			if tc.setup != nil {
				tc.setup(t, h)
			}
			from := idOf(tc.from)
			before := h.marks()
			res, entry := outside(t, h, from, tools.ToolSendMessage, A{"recipient": tc.to, "text": "hello"})
			wantReply(t, res, tc.want)
			effects := h.effects(before, from)
			to := idOf(tc.to)
			if tc.to == tree.User {
				to = tree.User
			}
			wantNoReservations(t, h)
			if tc.want != "" {
				if len(effects) != 0 || userMsgsFrom(h, from) != 0 || entry.Error == "" || entry.Messages != nil {
					t.Fatalf("a refused send logged %v (USER got %d) and the tool.call entry %+v", effects, userMsgsFrom(h, from), entry)
				}
				return
			}
			id, _ := res["message_id"].(string)
			got, ok := h.pendingMessage(to, id)
			if res["status"] != "sent" || !ok || got.Payload != "hello" || got.Sender != from || got.Kind != inbox.KindRequest {
				t.Fatalf("result %v; pending for %s: %+v (found %v)", res, tc.to, got, ok)
			}
			if to != tree.User {
				if ev := eventsOf(effects); ev != tc.to+" "+schema.MessageEnqueued {
					t.Fatalf("the send logged %s, want one message.enqueued in %s's log", ev, tc.to)
				}
			} else if len(effects) != 0 || userMsgsFrom(h, from) != 1 {
				t.Fatalf("a send to USER logged %v in agents' logs; USER holds %d messages from the sender", effects, userMsgsFrom(h, from))
			}
			if len(entry.Messages) != 1 || entry.Messages[0]["message_id"] != id {
				t.Fatalf("the tool.call entry records messages %v", entry.Messages)
			}
		})
	}
}

func TestSendMessageParseErrorsAreResults(t *testing.T) {
	h := family(t, func(h *harness) { h.cfg.Limits.MessageBytes = 1000 })
	before := h.marks()
	for _, tc := range []struct {
		args A
		want string
	}{
		{A{"recipient": "w1"}, `required parameter "text" is missing`},
		{A{"recipient": "w1", "text": 7}, `parameter "text" must be a string`},
		{A{"recipient": "w1", "text": strings.Repeat("x", 1001)}, "over the limit of 1000 bytes"},
		{A{"recipient": "w1", "text": "x", "cc": "w2"}, `unknown parameter "cc"`},
	} {
		res, entry := outside(t, h, idOf("lead"), tools.ToolSendMessage, tc.args)
		wantReply(t, res, tc.want)
		if entry.Error == "" || entry.Messages != nil {
			t.Fatalf("refused call logged as %+v", entry)
		}
	}
	if effects := h.effects(before, idOf("lead")); len(effects) != 0 {
		t.Fatalf("refused calls logged %v", effects)
	}
}

func TestBroadcast(t *testing.T) {
	t.Run("to the siblings", func(t *testing.T) {
		h := family(t)
		h.add("w3", "lead", "echo")
		before := h.marks()
		res, entry := outside(t, h, idOf("w1"), tools.ToolBroadcast, A{"text": "all"})
		wantReply(t, res, "")
		if ev := eventsOf(h.effects(before, idOf("w1"))); res["recipient_count"] != 2 || ev != "w2 message.enqueued,w3 message.enqueued" {
			t.Fatalf("result %v, logged %s", res, ev)
		}
		for _, to := range []string{"w2", "w3"} {
			a, _ := h.c.agent(idOf(to))
			got := pendingOf(a)
			if len(got) != 1 || got[0].Payload != "all" || got[0].Metadata["broadcast_id"] != res["message_id"] {
				t.Fatalf("%s holds %+v, want the copy with broadcast_id %v", to, got, res["message_id"])
			}
		}
		if n := len(entry.Messages); n != 2 {
			t.Fatalf("the tool.call entry records %d messages, want 2", n)
		}
	})
	t.Run("a root has no siblings", func(t *testing.T) {
		h := family(t)
		res, _ := outside(t, h, idOf("lead"), tools.ToolBroadcast, A{"text": "all"})
		wantReply(t, res, "no siblings")
	})
	t.Run("one full inbox refuses all", func(t *testing.T) {
		h := family(t, func(h *harness) { h.maxInbox = 1 })
		h.add("w3", "lead", "echo")
		// The last recipient is full: the earlier ones were checked (their
		// room reserved) when it refuses.
		targets, err := h.c.tree.BroadcastTargets(idOf("w1"))
		if err != nil || len(targets) != 2 {
			t.Fatalf("w1's broadcast targets: %v, %v", targets, err)
		}
		h.put("old", idOf("lead"), targets[1], inbox.KindRequest, "old")
		before := h.marks()
		res, entry := outside(t, h, idOf("w1"), tools.ToolBroadcast, A{"text": "all"})
		wantReply(t, res, "inbox full")
		if effects := h.effects(before, idOf("w1")); len(effects) != 0 || entry.Messages != nil {
			t.Fatalf("a refused broadcast logged %v and the tool.call entry %+v", effects, entry)
		}
		// The room checked for w2 before w3 refused is given back.
		wantNoReservations(t, h)
	})
}

// checkInboxPending fills lead's inbox with m1 to m4.
func checkInboxPending(h *harness) {
	lead := idOf("lead")
	h.put("m1", idOf("w1"), lead, inbox.KindRequest, "one")
	h.put("m2", tree.User, lead, inbox.KindRequest, "two")
	h.put("m3", idOf("w2"), lead, inbox.KindResponse, "three")
	h.put("m4", idOf("w1"), lead, inbox.KindResponse, "four")
}

// delivered lists the message ids of the message.delivered entries among
// effects.
func delivered(t *testing.T, effects []string) []string {
	t.Helper()
	var ids []string
	for _, e := range effects {
		f := strings.SplitN(e, " ", 3)
		if f[1] != schema.MessageDelivered {
			continue
		}
		var d schema.MessageDeliveredData
		if err := json.Unmarshal([]byte(f[2]), &d); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, d.MessageID)
	}
	return ids
}

func TestCheckInbox(t *testing.T) {
	// What one result carries: takeCount messages, and the first one
	// whatever its size.
	var many, manyTaken []string
	for i := range takeCount + 2 {
		many = append(many, fmt.Sprintf("m%03d", i))
	}
	manyTaken = many[:takeCount]
	cases := []struct {
		name    string
		args    A
		pending func(h *harness) // lead's inbox; checkInboxPending if nil
		shown   []string         // the messages the running turn was shown; nil: called outside a turn
		want    string           // message ids taken
		more    int
		errSub  string
	}{
		{name: "all", args: A{}, want: "m1 m2 m3 m4"},
		{name: "by sender", args: A{"sender": "w1"}, want: "m1 m4"},
		{name: "from USER", args: A{"sender": "USER"}, want: "m2"},
		{name: "by kind", args: A{"kind": "response"}, want: "m3 m4"},
		{name: "sender and kind", args: A{"sender": "w1", "kind": "response"}, want: "m4"},
		{name: "unknown sender", args: A{"sender": "ghost"}, errSub: `no reachable agent named "ghost"`},
		{name: "not those in the prompt", args: A{}, want: "m2 m4", shown: []string{"m1", "m3"}},
		{name: "one result's worth", args: A{}, want: strings.Join(manyTaken, " "), more: 2,
			pending: func(h *harness) {
				for _, id := range many {
					h.put(id, idOf("w1"), idOf("lead"), inbox.KindRequest, "x")
				}
			}},
		{name: "the first whatever its size", args: A{}, want: "m1", more: 3,
			pending: func(h *harness) {
				h.put("m1", idOf("w1"), idOf("lead"), inbox.KindRequest, strings.Repeat("x", takeBytes+1))
				h.put("m2", idOf("w1"), idOf("lead"), inbox.KindRequest, "two")
				h.put("m3", idOf("w1"), idOf("lead"), inbox.KindRequest, "three")
				h.put("m4", idOf("w1"), idOf("lead"), inbox.KindRequest, "four")
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := family(t, func(h *harness) { h.cfg.Limits.MessageBytes = 8 << 20 })
			lead := idOf("lead")
			if tc.pending != nil {
				tc.pending(h)
			} else {
				checkInboxPending(h)
			}
			var run *handRun
			if tc.shown != nil {
				run = h.handTurn(lead, "run1", tc.shown...)
				defer run.end(nil)
			}
			before := h.marks()
			var res map[string]any
			if run != nil {
				var err error
				if res, err = run.tools.CallTool(t.Context(), tools.ToolCheckInbox, tc.args); err != nil {
					t.Fatal(err)
				}
			} else {
				res, _ = outside(t, h, lead, tools.ToolCheckInbox, tc.args)
			}
			wantReply(t, res, tc.errSub)
			effects := h.effects(before, lead)
			if tc.errSub != "" {
				if len(effects) != 0 {
					t.Fatalf("a refused check_inbox logged %v", effects)
				}
				return
			}
			var ids []string
			for _, m := range res["messages"].([]any) {
				ids = append(ids, m.(map[string]any)["message_id"].(string))
			}
			if got := strings.Join(ids, " "); got != tc.want {
				t.Fatalf("took %q, want %q", got, tc.want)
			}
			if more, _ := res["more"].(int); more != tc.more {
				t.Fatalf("more = %v, want %d", res["more"], tc.more)
			}
			// What it took, and only that, is delivered: message.delivered
			// in lead's log, and no longer pending.
			if got := delivered(t, effects); strings.Join(got, " ") != tc.want || len(got) != len(effects) {
				t.Fatalf("logged %v, want message.delivered of %s", effects, tc.want)
			}
			a, _ := h.c.agent(lead)
			for _, m := range pendingOf(a) {
				if strings.Contains(" "+tc.want+" ", " "+m.ID+" ") {
					t.Fatalf("%s is still pending after check_inbox took it", m.ID)
				}
			}
		})
	}
}

func TestCheckInboxShowsSendersByName(t *testing.T) {
	h := family(t)
	lead := idOf("lead")
	h.put("m1", idOf("w1"), lead, inbox.KindRequest, "one")
	h.put("m2", tree.System, lead, inbox.KindError, "two")
	res, _ := outside(t, h, lead, tools.ToolCheckInbox, nil)
	want := `{"messages":[{"from":"w1","message_id":"m1","text":"one"},{"from":"SYSTEM","message_id":"m2","text":"two"}]}`
	if got := jsonOf(t, res); got != want {
		t.Fatalf("result %s, want %s", got, want)
	}
}

func TestEmptyCheckInboxLogsNoDelivery(t *testing.T) {
	h := family(t)
	lead := idOf("lead")
	before := h.marks()
	res, _ := outside(t, h, lead, tools.ToolCheckInbox, nil)
	if got, effects := jsonOf(t, res), h.effects(before, lead); got != `{"messages":[]}` || len(effects) != 0 {
		t.Fatalf("result %s, logged %v", got, effects)
	}
}

func TestComplete(t *testing.T) {
	t.Run("a root cannot", func(t *testing.T) {
		h := family(t)
		res, _ := outside(t, h, idOf("other"), tools.ToolComplete, A{"result": "r"})
		wantReply(t, res, "root agent cannot complete")
	})
	t.Run("not with children", func(t *testing.T) {
		h := family(t)
		res, _ := outside(t, h, idOf("w1"), tools.ToolComplete, A{"result": "r"})
		wantReply(t, res, "terminate them first")
		if a, _ := h.c.agent(idOf("w1")); a.State() == schema.StateTerminated {
			t.Fatal("a refused complete terminated the agent")
		}
	})
	t.Run("sends the result and terminates after the entry", func(t *testing.T) {
		h := family(t)
		w2 := idOf("w2")
		res, _ := outside(t, h, w2, tools.ToolComplete, A{"result": "done"})
		wantReply(t, res, "")
		id, _ := res["message_id"].(string)
		got, ok := h.pendingMessage(idOf("lead"), id)
		if !ok || got.Kind != inbox.KindResponse || got.Payload != "done" || got.Sender != w2 {
			t.Fatalf("result %v; lead holds %+v (found %v)", res, got, ok)
		}
		// The call's entry, then the termination.
		var evs []string
		for _, e := range h.entries(w2) {
			if e.Event == schema.ToolCall || e.Event == schema.AgentTerminated {
				evs = append(evs, e.Event)
			}
		}
		if strings.Join(evs, ",") != "tool.call,agent.terminated" {
			t.Fatalf("w2's log holds %v: want the entry, then the termination", evs)
		}
		if a, listed := h.c.agent(w2); listed && a.State() != schema.StateTerminated {
			t.Fatalf("w2 is %s after complete", a.State())
		}
	})
}
