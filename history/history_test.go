package history

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/warren-dev/warren/provider"
)

type logBuilder struct {
	t       *testing.T
	entries []Entry
}

func (l *logBuilder) add(event string, data map[string]any) *logBuilder {
	l.t.Helper()
	raw, err := json.Marshal(data)
	if err != nil {
		l.t.Fatal(err)
	}
	l.entries = append(l.entries, Entry{Seq: uint64(len(l.entries) + 1), Event: event, Data: raw})
	return l
}

func newLog(t *testing.T) *logBuilder { return &logBuilder{t: t} }

func (l *logBuilder) start(run string, turn int, prompt string) *logBuilder {
	return l.add(EventTurnStart, map[string]any{"run_id": run, "turn": turn, "prompt": prompt, "boot_id": "b1"})
}

func (l *logBuilder) call(run string, turn int, id, tool string, args, result map[string]any) *logBuilder {
	d := map[string]any{"run_id": run, "turn": turn, "call_id": id, "tool": tool, "args": args}
	if result != nil {
		d["result"] = result
	}
	return l.add(EventToolCall, d)
}

func (l *logBuilder) complete(run string, turn int, response string) *logBuilder {
	return l.add(EventTurnComplete, map[string]any{"run_id": run, "turn": turn, "response": response})
}

func build(t *testing.T, l *logBuilder) History {
	t.Helper()
	h, err := Build(l.entries)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestBuildCompletedTurns(t *testing.T) {
	l := newLog(t).
		add("agent.created", map[string]any{"agent_id": "x"}).
		start("r1", 1, "list files").
		call("r1", 1, "c1", "ls", map[string]any{"dir": "."}, map[string]any{"files": []any{"a"}}).
		add(EventToolCall, map[string]any{"run_id": "r1", "turn": 1, "call_id": "c2", "tool": "rm", "args": map[string]any{}, "error": "denied"}).
		complete("r1", 1, "one file").
		start("r2", 2, "thanks").
		complete("r2", 2, "welcome")
	h := build(t, l)
	want := []provider.Turn{
		{Message: "list files", Calls: []provider.ToolCall{
			{ID: "c1", Tool: "ls", Args: map[string]any{"dir": "."}, Result: map[string]any{"files": []any{"a"}}},
			{ID: "c2", Tool: "rm", Args: map[string]any{}, Error: "denied"},
		}, Response: "one file"},
		{Message: "thanks", Calls: []provider.ToolCall{}, Response: "welcome"},
	}
	if !reflect.DeepEqual(h.Turns, want) {
		t.Fatalf("turns:\n got %#v\nwant %#v", h.Turns, want)
	}
	if h.Open != nil {
		t.Fatalf("unexpected open turn %+v", h.Open)
	}
}

func TestFailedAndCancelledTurnsRolledBack(t *testing.T) {
	l := newLog(t).
		start("r1", 1, "ok").complete("r1", 1, "done").
		start("r2", 2, "boom").
		call("r2", 2, "c1", "write", map[string]any{"f": "x"}, map[string]any{"ok": true}).
		add(EventTurnRetry, map[string]any{"run_id": "r2", "turn": 2, "attempt": 1}).
		add(EventTurnFailed, map[string]any{"run_id": "r2", "turn": 2, "error": "500", "attempts": 4}).
		start("r3", 3, "stop").
		add(EventTurnCancelled, map[string]any{"run_id": "r3", "turn": 3}).
		start("r4", 4, "again").complete("r4", 4, "fine")
	h := build(t, l)
	if len(h.Turns) != 2 || h.Turns[0].Message != "ok" || h.Turns[1].Message != "again" {
		t.Fatalf("turns %+v; want only the completed ones", h.Turns)
	}
	if len(h.Turns[1].Calls) != 0 {
		t.Fatalf("a failed turn's call leaked into a later turn: %+v", h.Turns[1].Calls)
	}
	if h.Open != nil {
		t.Fatal("open turn after terminal events")
	}
}

// EventTurnRetry is an event Build does not need; it must be ignored.
const EventTurnRetry = "turn.retry"

func TestInterruptedOpenTurn(t *testing.T) {
	l := newLog(t).
		start("r1", 1, "first").complete("r1", 1, "ok").
		start("r2", 2, "deploy").
		call("r2", 2, "c1", "build", map[string]any{}, map[string]any{"ok": true}).
		call("r2", 2, "c2", "upload", map[string]any{"to": "prod"}, nil).
		add(EventRunInterrupted, map[string]any{"run_id": "r2", "reason": "process_restart"})
	h := build(t, l)
	if len(h.Turns) != 1 {
		t.Fatalf("turns %+v", h.Turns)
	}
	o := h.Open
	if o == nil || o.RunID != "r2" || o.Turn != 2 || o.Prompt != "deploy" || !o.Interrupted || o.Reason != "process_restart" {
		t.Fatalf("open %+v", o)
	}
	if len(o.Calls) != 2 || !HasResult(o.Calls[0]) || HasResult(o.Calls[1]) {
		t.Fatalf("open calls %+v", o.Calls)
	}
	block := Block(h, "continue", BlockOptions{})
	if !strings.Contains(block, "[TOOL CALL: upload] {\"to\":\"prod\"} (interrupted: no result recorded)") {
		t.Fatalf("interrupted call not marked:\n%s", block)
	}
	if strings.Contains(strings.ToLower(block), "pending") {
		t.Fatalf("block calls something pending:\n%s", block)
	}
}

func TestReRunKeepsRecordedCalls(t *testing.T) {
	l := newLog(t).
		start("r1", 1, "ask the user").
		call("r1", 1, "c1", "search", map[string]any{"q": "x"}, map[string]any{"hits": 3.0}).
		add(EventRunWaiting, map[string]any{"run_id": "r1", "wait_kind": "question", "prompt": "which one?", "token_id": "tok_0123456789abcdef", "deadline": "2026-11-22T10:00:00Z"})
	h := build(t, l)
	if h.Open == nil || !h.Open.Waiting || h.Open.WaitPrompt != "which one?" || h.Open.TokenID != "tok_0123456789abcdef" {
		t.Fatalf("waiting open turn %+v", h.Open)
	}
	l.add(EventRunResumed, map[string]any{"run_id": "r1", "token_id": "tok_0123456789abcdef"}).
		add("token.consumed", map[string]any{"token_id": "tok_0123456789abcdef", "run_id": "r1"}).
		start("r1", 1, "ask the user (re-run)").
		call("r1", 1, "c2", "await_input", map[string]any{"kind": "question"}, map[string]any{"response": "the first"})
	h = build(t, l)
	o := h.Open
	if o == nil || o.Waiting || o.Prompt != "ask the user (re-run)" || o.Starts != 2 || o.StartSeq != 1 {
		t.Fatalf("re-run open turn %+v", o)
	}
	if len(o.Calls) != 2 || o.Calls[0].Tool != "search" || o.Calls[1].Tool != "await_input" {
		t.Fatalf("re-run lost recorded calls: %+v", o.Calls)
	}
	l.complete("r1", 1, "done")
	h = build(t, l)
	if len(h.Turns) != 1 || h.Turns[0].Message != "ask the user (re-run)" || len(h.Turns[0].Calls) != 2 {
		t.Fatalf("completed re-run %+v", h.Turns)
	}
}

func TestNewRunAbandonsOpenTurn(t *testing.T) {
	l := newLog(t).
		start("r1", 1, "old").
		call("r1", 1, "c1", "x", nil, nil).
		add(EventRunInterrupted, map[string]any{"run_id": "r1", "reason": "process_restart"}).
		start("r2", 2, "new").
		call("r2", 2, "c2", "y", nil, map[string]any{"ok": true})
	h := build(t, l)
	if h.Open == nil || h.Open.RunID != "r2" || len(h.Open.Calls) != 1 || h.Open.Calls[0].Tool != "y" || h.Open.Interrupted {
		t.Fatalf("open %+v", h.Open)
	}
	// A stray terminal event for the abandoned run changes nothing.
	l.complete("r1", 1, "late")
	h = build(t, l)
	if len(h.Turns) != 0 || h.Open == nil || h.Open.RunID != "r2" {
		t.Fatalf("after stray complete: %+v %+v", h.Turns, h.Open)
	}
}

func TestCallRecordsMergedByCallID(t *testing.T) {
	l := newLog(t).
		start("r1", 1, "p").
		call("r1", 1, "c1", "upload", map[string]any{"f": 1.0}, nil).
		call("r1", 1, "c1", "upload", nil, map[string]any{"ok": true}).
		call("r1", 1, "", "noid", nil, nil).
		call("r1", 1, "", "noid", nil, nil)
	h := build(t, l)
	c := h.Open.Calls
	if len(c) != 3 || !reflect.DeepEqual(c[0].Args, map[string]any{"f": 1.0}) || !HasResult(c[0]) {
		t.Fatalf("calls %+v", c)
	}
}

func TestMalformedEntries(t *testing.T) {
	cases := map[string]Entry{
		"bad json":        {Seq: 7, Event: EventTurnStart, Data: json.RawMessage(`{"run_id":`)},
		"empty data":      {Seq: 7, Event: EventTurnComplete},
		"wrong type":      {Seq: 7, Event: EventTurnStart, Data: json.RawMessage(`{"run_id":5}`)},
		"fractional turn": {Seq: 7, Event: EventTurnFailed, Data: json.RawMessage(`{"turn":1.5}`)},
		"array data":      {Seq: 7, Event: EventRunWaiting, Data: json.RawMessage(`[1,2]`)},
		"bad call args":   {Seq: 7, Event: EventToolCall, Data: json.RawMessage(`{"tool":"x","args":{"a":}}`)},
		"call not object": {Seq: 7, Event: EventToolCall, Data: json.RawMessage(`"tool"`)},
	}
	for name, bad := range cases {
		t.Run(name, func(t *testing.T) {
			l := newLog(t).start("r1", 1, "p")
			entries := append(l.entries, bad)
			_, err := Build(entries)
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "seq 7") {
				t.Fatalf("err = %v, want ErrMalformed naming seq 7", err)
			}
			// RecordedCalls skips what it cannot decode and does not panic.
			_ = RecordedCalls(entries, "r1")
		})
	}
	// Unknown events and fields, and odd but valid values, are accepted.
	l := newLog(t).
		add("something.new", map[string]any{"x": 1}).
		add(EventTurnStart, map[string]any{"run_id": "r", "turn": 1, "prompt": "p", "future": true}).
		add(EventToolCall, map[string]any{"run_id": "r", "turn": 1, "tool": "t", "args": "scalar", "result": 42, "error": nil})
	l.entries = append(l.entries, Entry{Seq: 9, Event: "unknown", Data: json.RawMessage(`garbage`)})
	h := build(t, l)
	if got := h.Open.Calls[0]; got.Args["value"] != "scalar" || got.Result["value"] != 42.0 {
		t.Fatalf("scalar args/result not kept: %+v", got)
	}
}

func FuzzBuild(f *testing.F) {
	f.Add("turn.start", []byte(`{"run_id":"r","turn":1,"prompt":"p"}`))
	f.Add("tool.call", []byte(`{"call_id":"c","tool":"t","args":{},"result":{"a":1}}`))
	f.Add("turn.complete", []byte(`{"run_id":"r","turn":1,"response":"x"}`))
	f.Add("tool.call", []byte(`{"tool":"t","args":[1],"error":{"x":1}}`))
	f.Fuzz(func(t *testing.T, event string, data []byte) {
		entries := []Entry{
			{Seq: 1, Event: EventTurnStart, Data: json.RawMessage(`{"run_id":"r","turn":1,"prompt":"p"}`)},
			{Seq: 2, Event: event, Data: data},
			{Seq: 3, Event: EventToolCall, Data: json.RawMessage(`{"run_id":"r","turn":1,"tool":"t"}`)},
		}
		h, err := Build(entries)
		if err == nil {
			_ = Block(h, "now", BlockOptions{MaxMessage: 5, MaxToolResult: 5})
		} else if !errors.Is(err, ErrMalformed) {
			t.Fatalf("error does not wrap ErrMalformed: %v", err)
		}
		_ = RecordedCalls(entries, "r")
	})
}
