package toolexec

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/tools"
)

type A = map[string]any

// family: lead (a root) with children w1 and w2; w1 has a child w1a; a
// second root, other.
func family() *fakeEnv {
	f := newFakeEnv()
	lead := f.add("lead", "")
	w1 := f.add("w1", lead)
	f.add("w2", lead)
	f.add("w1a", w1)
	f.add("other", "")
	return f
}

// outside calls a tool for self outside any run and returns the reply and
// the caller's log.
func outside(t *testing.T, f *fakeEnv, self, tool string, args A) (map[string]any, *memLog) {
	t.Helper()
	l := &memLog{}
	res, err := CallOutside(context.Background(), f, Caller{ID: self, Log: l}, tool, args)
	if err != nil {
		t.Fatalf("%s %v: %v", tool, args, err)
	}
	return res, l
}

// wantReply checks a reply: want is a substring of its error, or "" for
// success.
func wantReply(t *testing.T, res map[string]any, want string) {
	t.Helper()
	text, isErr := tools.IsError(res)
	switch {
	case want == "" && isErr:
		t.Fatalf("got error %q, want success", text)
	case want != "" && !isErr:
		t.Fatalf("got %v, want an error containing %q", res, want)
	case want != "" && !strings.Contains(text, want):
		t.Fatalf("got error %q, want it to contain %q", text, want)
	}
}

func TestSendMessage(t *testing.T) {
	cases := []struct {
		name, from, to string
		setup          func(f *fakeEnv)
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
		{name: "to a terminated agent", from: "lead", to: "w1", want: "agent not found",
			setup: func(f *fakeEnv) { f.agents[idOf("w1")].State = tools.StateTerminated }},
		{name: "to a full inbox", from: "lead", to: "w1", want: "inbox full", setup: func(f *fakeEnv) {
			f.inboxCap = 1
			f.agents[idOf("w1")].pending = []inbox.Message{{ID: "old"}}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := family()
			if tc.setup != nil {
				tc.setup(f)
			}
			res, l := outside(t, f, idOf(tc.from), tools.ToolSendMessage, A{"recipient": tc.to, "text": "hello"})
			wantReply(t, res, tc.want)
			recs := l.records()
			if len(recs) != 1 || recs[0].Event != schema.ToolCall {
				t.Fatalf("the caller's log holds %v, want one tool.call", recs)
			}
			entry := recs[0].Data.(schema.ToolCallData)
			to := idOf(tc.to)
			if tc.to == "USER" {
				to = "USER"
			}
			if tc.want != "" {
				if len(f.enqueued) != 0 || entry.Error == "" || entry.Messages != nil {
					t.Fatalf("a refused send enqueued %v and logged %+v", f.enqueued, entry)
				}
				return
			}
			got := f.enqueued[to]
			if len(got) != 1 || got[0].Payload != "hello" || got[0].Sender != idOf(tc.from) || got[0].Kind != inbox.KindRequest {
				t.Fatalf("enqueued for %s: %+v", to, got)
			}
			if res["status"] != "sent" || res["message_id"] != got[0].ID {
				t.Fatalf("result %v, message %s", res, got[0].ID)
			}
			if len(entry.Messages) != 1 || entry.Messages[0]["message_id"] != got[0].ID {
				t.Fatalf("the tool.call entry records messages %v", entry.Messages)
			}
		})
	}
}

func TestSendMessageParseErrorsAreResults(t *testing.T) {
	f := family()
	for _, tc := range []struct {
		args A
		want string
	}{
		{A{"recipient": "w1"}, `required parameter "text" is missing`},
		{A{"recipient": "w1", "text": 7}, `parameter "text" must be a string`},
		{A{"recipient": "w1", "text": strings.Repeat("x", 1001)}, "over the limit of 1000 bytes"},
		{A{"recipient": "w1", "text": "x", "cc": "w2"}, `unknown parameter "cc"`},
	} {
		res, _ := outside(t, f, idOf("lead"), tools.ToolSendMessage, tc.args)
		wantReply(t, res, tc.want)
	}
	if len(f.enqueued) != 0 {
		t.Fatalf("refused calls enqueued %v", f.enqueued)
	}
}

func TestBroadcast(t *testing.T) {
	t.Run("to the siblings", func(t *testing.T) {
		f := family()
		f.add("w3", idOf("lead"))
		res, l := outside(t, f, idOf("w1"), tools.ToolBroadcast, A{"text": "all"})
		wantReply(t, res, "")
		if res["recipient_count"] != 2 || len(f.enqueued[idOf("w2")]) != 1 || len(f.enqueued[idOf("w3")]) != 1 {
			t.Fatalf("result %v, enqueued %v", res, f.enqueued)
		}
		for _, m := range append(f.enqueued[idOf("w2")], f.enqueued[idOf("w3")]...) {
			if m.Metadata["broadcast_id"] != res["message_id"] {
				t.Fatalf("copy %+v lacks broadcast_id %v", m, res["message_id"])
			}
		}
		if n := len(l.records()[0].Data.(schema.ToolCallData).Messages); n != 2 {
			t.Fatalf("the tool.call entry records %d messages, want 2", n)
		}
	})
	t.Run("a root has no siblings", func(t *testing.T) {
		res, _ := outside(t, family(), idOf("lead"), tools.ToolBroadcast, A{"text": "all"})
		wantReply(t, res, "no siblings")
	})
	t.Run("one full inbox refuses all", func(t *testing.T) {
		f := family()
		f.add("w3", idOf("lead"))
		f.inboxCap = 1
		f.agents[idOf("w3")].pending = []inbox.Message{{ID: "old"}}
		res, l := outside(t, f, idOf("w1"), tools.ToolBroadcast, A{"text": "all"})
		wantReply(t, res, "inbox full")
		if len(f.enqueued) != 0 || l.records()[0].Data.(schema.ToolCallData).Messages != nil {
			t.Fatalf("a refused broadcast enqueued %v", f.enqueued)
		}
	})
}

func msg(id, sender string, kind inbox.Kind, text string) inbox.Message {
	return inbox.Message{ID: id, Sender: sender, Recipient: idOf("lead"), Kind: kind, Payload: text}
}

func TestCheckInbox(t *testing.T) {
	setup := func() *fakeEnv {
		f := family()
		f.agents[idOf("lead")].pending = []inbox.Message{
			msg("m1", idOf("w1"), inbox.KindRequest, "one"),
			msg("m2", "USER", inbox.KindRequest, "two"),
			msg("m3", idOf("w2"), inbox.KindResponse, "three"),
			msg("m4", idOf("w1"), inbox.KindResponse, "four"),
		}
		return f
	}
	cases := []struct {
		name   string
		args   A
		setup  func(f *fakeEnv)
		want   string // message ids taken
		more   int
		errSub string
	}{
		{name: "all", args: A{}, want: "m1 m2 m3 m4"},
		{name: "by sender", args: A{"sender": "w1"}, want: "m1 m4"},
		{name: "from USER", args: A{"sender": "USER"}, want: "m2"},
		{name: "by kind", args: A{"kind": "response"}, want: "m3 m4"},
		{name: "sender and kind", args: A{"sender": "w1", "kind": "response"}, want: "m4"},
		{name: "unknown sender", args: A{"sender": "ghost"}, errSub: `no reachable agent named "ghost"`},
		{name: "not those in the prompt", args: A{}, want: "m2 m4",
			setup: func(f *fakeEnv) { f.agents[idOf("lead")].shown = []string{"m1", "m3"} }},
		{name: "one result's worth", args: A{}, want: "m1 m2", more: 2,
			setup: func(f *fakeEnv) { f.limits.TakeCount = 2 }},
		{name: "the first whatever its size", args: A{}, want: "m1", more: 3,
			setup: func(f *fakeEnv) { f.limits.TakeBytes = 1 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := setup()
			if tc.setup != nil {
				tc.setup(f)
			}
			res, _ := outside(t, f, idOf("lead"), tools.ToolCheckInbox, tc.args)
			wantReply(t, res, tc.errSub)
			if tc.errSub != "" {
				if len(f.effects) != 0 {
					t.Fatalf("a refused check_inbox did %v", f.effects)
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
			if want := fmt.Sprintf("delivered %s %v", idOf("lead"), ids); len(f.effects) != 1 || f.effects[0] != want {
				t.Fatalf("effects %v, want [%s]", f.effects, want)
			}
		})
	}
}

func TestCheckInboxShowsSendersByName(t *testing.T) {
	f := family()
	f.agents[idOf("lead")].pending = []inbox.Message{msg("m1", idOf("w1"), inbox.KindRequest, "one"), msg("m2", "SYSTEM", inbox.KindError, "two")}
	res, _ := outside(t, f, idOf("lead"), tools.ToolCheckInbox, nil)
	b, _ := json.Marshal(res)
	want := `{"messages":[{"from":"w1","message_id":"m1","text":"one"},{"from":"SYSTEM","message_id":"m2","text":"two"}]}`
	if string(b) != want {
		t.Fatalf("result %s, want %s", b, want)
	}
}

func TestEmptyCheckInboxLogsNoDelivery(t *testing.T) {
	f := family()
	res, _ := outside(t, f, idOf("lead"), tools.ToolCheckInbox, nil)
	if b, _ := json.Marshal(res); string(b) != `{"messages":[]}` || len(f.effects) != 0 {
		t.Fatalf("result %s, effects %v", b, f.effects)
	}
}

func TestComplete(t *testing.T) {
	t.Run("a root cannot", func(t *testing.T) {
		f := family()
		res, _ := outside(t, f, idOf("other"), tools.ToolComplete, A{"result": "r"})
		wantReply(t, res, "root agent cannot complete")
	})
	t.Run("not with children", func(t *testing.T) {
		f := family()
		res, _ := outside(t, f, idOf("w1"), tools.ToolComplete, A{"result": "r"})
		wantReply(t, res, "terminate them first")
	})
	t.Run("sends the result and terminates after the entry", func(t *testing.T) {
		f := family()
		res, l := outside(t, f, idOf("w2"), tools.ToolComplete, A{"result": "done"})
		wantReply(t, res, "")
		got := f.enqueued[idOf("lead")]
		if len(got) != 1 || got[0].Kind != inbox.KindResponse || got[0].Payload != "done" || res["message_id"] != got[0].ID {
			t.Fatalf("result %v, enqueued %+v", res, got)
		}
		if len(l.records()) != 1 || f.effects[len(f.effects)-1] != "completing "+idOf("w2") {
			t.Fatalf("log %v, effects %v: want the entry, then completing", l.records(), f.effects)
		}
	})
}
