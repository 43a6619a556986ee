package history

import (
	"reflect"
	"testing"

	"github.com/warren-dev/warren/provider"
)

func TestRecordedCallsOfRun(t *testing.T) {
	l := newLog(t).
		start("r1", 1, "a").
		call("r1", 1, "c1", "one", map[string]any{"n": 1.0}, map[string]any{"ok": 1.0}).
		complete("r1", 1, "x").
		start("r2", 2, "b").
		call("r2", 2, "c2", "search", map[string]any{"q": "x"}, map[string]any{"hits": 2.0}).
		call("r2", 2, "c3", "await_input", map[string]any{"kind": "q"}, nil).
		add(EventRunInterrupted, map[string]any{"run_id": "r2", "reason": "process_restart"}).
		add(EventRunResumed, map[string]any{"run_id": "r2", "token_id": ""}).
		start("r2", 2, "b").
		// the re-run completes the interrupted call under its call_id and goes on
		call("r2", 2, "c3", "await_input", nil, map[string]any{"response": "yes"}).
		// a tool.call without run_id belongs to the open turn's run
		add(EventToolCall, map[string]any{"call_id": "c4", "tool": "write", "args": map[string]any{}, "result": map[string]any{}})

	got := RecordedCalls(l.entries, "r2")
	want := []provider.ToolCall{
		{ID: "c2", Tool: "search", Args: map[string]any{"q": "x"}, Result: map[string]any{"hits": 2.0}},
		{ID: "c3", Tool: "await_input", Args: map[string]any{"kind": "q"}, Result: map[string]any{"response": "yes"}},
		{ID: "c4", Tool: "write", Args: map[string]any{}, Result: map[string]any{}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("RecordedCalls(r2):\n got %#v\nwant %#v", got, want)
	}
	if got := RecordedCalls(l.entries, "r1"); len(got) != 1 || got[0].Tool != "one" {
		t.Fatalf("RecordedCalls(r1) = %+v", got)
	}
	if got := RecordedCalls(l.entries, "nope"); len(got) != 0 {
		t.Fatalf("RecordedCalls(unknown run) = %+v", got)
	}
	calls := RunCalls(l.entries, "r2")
	if calls[1].CallID != "c3" || calls[1].Seq != 6 || calls[2].Turn != 2 || calls[1].Turn != 2 || calls[2].RunID != "r2" {
		t.Fatalf("RunCalls details %+v", calls)
	}
	// The open turn of Build shows the same calls.
	h := build(t, l)
	if !reflect.DeepEqual(h.Open.Calls, want) {
		t.Fatalf("open calls %#v", h.Open.Calls)
	}
}

func BenchmarkBuild(b *testing.B) {
	l := &logBuilder{t: &testing.T{}}
	for i := 0; i < 1000; i++ {
		l.start("r", i+1, "prompt").
			call("r", i+1, "c", "tool", map[string]any{"a": 1}, map[string]any{"r": "x"}).
			complete("r", i+1, "response")
	}
	b.ResetTimer()
	for range b.N {
		if _, err := Build(l.entries); err != nil {
			b.Fatal(err)
		}
	}
}
