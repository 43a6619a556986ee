package toolexec

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/tools"
)

func callTools(l *memLog) []string {
	var out []string
	for _, r := range l.records() {
		switch d := r.Data.(type) {
		case schema.ToolCallData:
			out = append(out, d.Tool)
		case json.RawMessage: // an entry written behind, encoded
			var e schema.ToolCallData
			_ = json.Unmarshal(d, &e)
			out = append(out, e.Tool)
		}
	}
	return out
}

func TestCallEntryBytes(t *testing.T) {
	e := schema.ToolCallData{CallID: "c", Tool: "send_message", Args: A{"text": "t", "recipient": "w"}, Result: A{"status": "sent"},
		RunID: "r", Turn: 2, Messages: []map[string]any{{"message_id": "m"}}}
	b, _ := json.Marshal(e)
	want := `{"call_id":"c","tool":"send_message","args":{"recipient":"w","text":"t"},"result":{"status":"sent"},"run_id":"r","turn":2,"messages":[{"message_id":"m"}]}`
	if string(b) != want {
		t.Fatalf("tool.call data %s\nwant %s", b, want)
	}
	b, _ = json.Marshal(schema.ToolCallData{CallID: "c", Tool: "gate", Args: A{}, Error: "no"})
	if want := `{"call_id":"c","tool":"gate","args":{},"error":"no"}`; string(b) != want {
		t.Fatalf("tool.call data %s\nwant %s", b, want)
	}
}

func TestAttemptDerivesTheSameIDsOnARerun(t *testing.T) {
	ids := func() []any {
		f := family()
		a := newAttempt(f, Caller{ID: idOf("lead"), Log: &memLog{}}, "run1", 1, nil, nil)
		var out []any
		for _, to := range []string{"w1", "w2", "w1"} {
			res, err := a.CallTool(t.Context(), tools.ToolSendMessage, A{"recipient": to, "text": "x"})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, res["message_id"])
		}
		if err := a.Drain(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	first, second := ids(), ids()
	if first[0] == first[2] || first[0] == first[1] {
		t.Fatalf("calls at different positions derived the same id: %v", first)
	}
	for i := range first {
		if first[i] != second[i] {
			t.Fatalf("a re-run derived %v, the first run %v", second, first)
		}
	}
}

func TestAttemptAnswersRecordedCallsFromTheLog(t *testing.T) {
	f := family()
	l := &memLog{}
	var redone []string
	recorded := []Recorded{
		{Tool: tools.ToolSendMessage, Result: json.RawMessage(`{"status":"sent","message_id":"m0"}`),
			Redo: func(args A) { redone = append(redone, args["recipient"].(string)) }},
		{Tool: tools.ToolGate, Error: "no child agent named \"x\"", Redo: func(A) { redone = append(redone, "gate") }},
	}
	a := newAttempt(f, Caller{ID: idOf("lead"), Log: l}, "run1", 1, recorded, nil)
	res, err := a.CallTool(t.Context(), tools.ToolSendMessage, A{"recipient": "w1", "text": "x"})
	if err != nil || res["message_id"] != "m0" {
		t.Fatalf("the recorded send answered %v, %v", res, err)
	}
	res, _ = a.CallTool(t.Context(), tools.ToolGate, A{"agent_name": "x"})
	wantReply(t, res, `no child agent named "x"`)
	// The third call is new: it runs.
	res, _ = a.CallTool(t.Context(), tools.ToolPoke, A{"agent_name": "w2"})
	wantReply(t, res, "")
	if err := a.Drain(); err != nil {
		t.Fatal(err)
	}
	if strings.Join(redone, ",") != "w1" {
		t.Fatalf("redone %v, want the recorded send only (a recorded error has no effects)", redone)
	}
	if got := strings.Join(callTools(l), ","); got != tools.ToolPoke {
		t.Fatalf("logged %s, want only the new call", got)
	}
	if len(f.enqueued) != 0 {
		t.Fatalf("a recorded send was sent again: %v", f.enqueued)
	}
}

func TestAttemptRunsACallThatDiffersFromTheRecord(t *testing.T) {
	f := family()
	l := &memLog{}
	recorded := []Recorded{{Tool: tools.ToolGate, Result: json.RawMessage(`{"status":"gated"}`)}}
	a := newAttempt(f, Caller{ID: idOf("lead"), Log: l}, "run1", 1, recorded, nil)
	res, _ := a.CallTool(t.Context(), tools.ToolPoke, A{"agent_name": "w2"})
	if res["status"] != "poked" {
		t.Fatalf("a call whose tool differs from the record answered %v", res)
	}
}

func TestAttemptAnswersAwaitInputWithTheResponse(t *testing.T) {
	f := family()
	l := &memLog{}
	resp := "yes"
	a := newAttempt(f, Caller{ID: idOf("lead"), Log: l}, "run1", 1, nil, &resp)
	res, err := a.CallTool(t.Context(), tools.ToolAwaitInput, A{"kind": "approval", "prompt": "ok?", "timeout": 5})
	if err != nil || res["response"] != "yes" || len(f.effects) != 0 {
		t.Fatalf("resumed await_input: %v %v, effects %v", res, err, f.effects)
	}
	if recs := l.records(); len(recs) != 1 || recs[0].Data.(schema.ToolCallData).Result["response"] != "yes" {
		t.Fatalf("logged %v", recs)
	}
	// Only once: a second await_input waits again.
	if _, err := a.CallTool(t.Context(), tools.ToolAwaitInput, A{"kind": "approval", "prompt": "ok?", "timeout": 5}); !errors.Is(err, provider.ErrRunSuspended) {
		t.Fatalf("second await_input: %v, want ErrRunSuspended", err)
	}
}

// TestAttemptKeepsCallOrderInTheLog: sends' entries are written behind the
// call, and any other tool waits for them, so the log holds the calls in
// call order.
func TestAttemptKeepsCallOrderInTheLog(t *testing.T) {
	f := family()
	l := &memLog{}
	a := newAttempt(f, Caller{ID: idOf("lead"), Log: l}, "run1", 1, nil, nil)
	for _, c := range []struct {
		tool string
		args A
	}{
		{tools.ToolSendMessage, A{"recipient": "w1", "text": "a"}},
		{tools.ToolBroadcast, A{"text": "b"}},
		{tools.ToolListChildren, nil},
		{tools.ToolSendMessage, A{"recipient": "w2", "text": "c"}},
	} {
		if _, err := a.CallTool(t.Context(), c.tool, c.args); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Drain(); err != nil {
		t.Fatal(err)
	}
	want := "send_message,broadcast,list_children,send_message"
	if got := strings.Join(callTools(l), ","); got != want {
		t.Fatalf("logged %s, want %s", got, want)
	}
	// Entries written behind are encoded when the call returns (the
	// caller may change its maps afterwards); the others are not.
	for i, r := range l.records() {
		if _, raw := r.Data.(json.RawMessage); raw != (i != 2) {
			t.Fatalf("entry %d holds %T", i, r.Data)
		}
	}
}

func TestAttemptDrainReportsAFailedEntry(t *testing.T) {
	f := family()
	l := &memLog{err: errString("fsync failed")}
	a := newAttempt(f, Caller{ID: idOf("lead"), Log: l}, "run1", 1, nil, nil)
	res, err := a.CallTool(t.Context(), tools.ToolSendMessage, A{"recipient": "w1", "text": "a"})
	if err != nil || res["status"] != "sent" {
		t.Fatalf("the send: %v %v (it returns before its entry is written)", res, err)
	}
	if err := a.Drain(); err == nil || !strings.Contains(err.Error(), "fsync failed") {
		t.Fatalf("Drain = %v, want the failed write", err)
	}
	// The next call that is not written behind sees it too.
	if _, err := a.CallTool(t.Context(), tools.ToolListChildren, nil); err == nil {
		t.Fatal("a call after a failed entry succeeded")
	}
}

func TestAttemptStepOfSends(t *testing.T) {
	step := []provider.ToolRequest{
		{Tool: tools.ToolSendMessage, Args: A{"recipient": "w1", "text": "a"}},
		{Tool: tools.ToolSendMessage, Args: A{"recipient": "w2", "text": "b"}},
		{Tool: tools.ToolSendMessage, Args: A{"recipient": "w1", "text": "c"}},
		{Tool: tools.ToolSendMessage, Args: A{"recipient": "ghost", "text": "d"}},
	}
	t.Run("together", func(t *testing.T) {
		f := family()
		l := &memLog{}
		a := newAttempt(f, Caller{ID: idOf("lead"), Log: l}, "run1", 1, nil, nil)
		out := a.CallTools(t.Context(), step)
		for i, want := range []string{"", "", "", `no reachable agent named "ghost"`} {
			if out[i].Err != nil {
				t.Fatal(out[i].Err)
			}
			wantReply(t, out[i].Result, want)
		}
		if len(f.enqueued[idOf("w1")]) != 2 || f.enqueued[idOf("w1")][1].Payload != "c" || len(f.enqueued[idOf("w2")]) != 1 {
			t.Fatalf("enqueued %v", f.enqueued)
		}
		if got := len(l.records()); got != 4 {
			t.Fatalf("logged %d entries, want 4", got)
		}
		// The positions are those of one-by-one calls.
		b := newAttempt(family(), Caller{ID: idOf("lead"), Log: &memLog{}}, "run1", 1, nil, nil)
		for i, c := range step[:3] {
			res, _ := b.CallTool(t.Context(), c.Tool, c.Args)
			if res["message_id"] != out[i].Result["message_id"] {
				t.Fatalf("call %d: a step derived %v, one-by-one %v", i, out[i].Result["message_id"], res["message_id"])
			}
		}
	})
	t.Run("a step over an inbox's room", func(t *testing.T) {
		f := family()
		f.inboxCap = 1
		a := newAttempt(f, Caller{ID: idOf("lead"), Log: &memLog{}}, "run1", 1, nil, nil)
		out := a.CallTools(t.Context(), step[:3])
		wantReply(t, out[0].Result, "")
		wantReply(t, out[1].Result, "")
		wantReply(t, out[2].Result, "inbox full")
		if len(f.enqueued[idOf("w1")]) != 1 {
			t.Fatalf("enqueued %v", f.enqueued)
		}
	})
	t.Run("with another tool, call by call", func(t *testing.T) {
		f := family()
		l := &memLog{}
		a := newAttempt(f, Caller{ID: idOf("lead"), Log: l}, "run1", 1, nil, nil)
		mixed := append([]provider.ToolRequest{{Tool: tools.ToolPoke, Args: A{"agent_name": "w1"}}}, step[:2]...)
		out := a.CallTools(t.Context(), mixed)
		if err := a.Drain(); err != nil {
			t.Fatal(err)
		}
		if out[0].Result["status"] != "poked" || len(l.records()) != 3 {
			t.Fatalf("out %v, log %v", out, l.records())
		}
	})
	t.Run("a failed call stops the step", func(t *testing.T) {
		f := family()
		a := newAttempt(f, Caller{ID: idOf("lead"), Log: &memLog{}}, "run1", 1, nil, nil)
		out := a.CallTools(t.Context(), []provider.ToolRequest{
			{Tool: tools.ToolAwaitInput, Args: A{"kind": "approval", "prompt": "p", "timeout": 1}},
			step[0],
		})
		if !errors.Is(out[0].Err, provider.ErrRunSuspended) || !errors.Is(out[1].Err, provider.ErrRunSuspended) ||
			!strings.Contains(out[1].Err.Error(), "not run") {
			t.Fatalf("out %v", out)
		}
		if len(f.enqueued) != 0 {
			t.Fatalf("a call after the suspension ran: %v", f.enqueued)
		}
	})
}
