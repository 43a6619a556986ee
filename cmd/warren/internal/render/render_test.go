package render

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/warren-dev/warren/cmd/warren/internal/reply"
	"github.com/warren-dev/warren/eventlog"
)

func TestTableAlignsColumns(t *testing.T) {
	var b strings.Builder
	table(&b, []string{"PATH", "STATUS"}, [][]string{{"lead/wörker", "idle"}, {"x", "running"}})
	want := "PATH         STATUS\nlead/wörker  idle\nx            running\n"
	if b.String() != want {
		t.Errorf("table =\n%q\nwant\n%q", b.String(), want)
	}
}

func TestRenderTreeBoxDrawing(t *testing.T) {
	agents := []map[string]any{
		{"agent_id": "r", "name": "lead", "status": "idle"},
		{"agent_id": "a", "name": "a", "parent_id": "r", "status": "running"},
		{"agent_id": "b", "name": "b", "parent_id": "r", "status": "idle"},
		{"agent_id": "c", "name": "c", "parent_id": "a", "status": "suspended"},
		{"agent_id": "o", "name": "orphan", "parent_id": "gone", "status": "idle"},
	}
	var b strings.Builder
	renderTree(&b, buildTree(agents))
	want := "lead  [idle]\n├── a  [running]\n│   └── c  [suspended]\n└── b  [idle]\norphan  [idle]\n"
	if b.String() != want {
		t.Errorf("tree =\n%s\nwant\n%s", b.String(), want)
	}
}

func TestCutAndQuote(t *testing.T) {
	if got := Cut("abcdef", 4); got != "abc…" {
		t.Errorf("cut = %q", got)
	}
	if got := Cut("a\nb", 10); got != `a\nb` {
		t.Errorf("cut flattens newlines: %q", got)
	}
	for in, want := range map[string]string{"lead/w1": "lead/w1", "it's": `'it'\''s'`, "": "''", "a b": "'a b'"} {
		if got := ShellQuote(in); got != want {
			t.Errorf("ShellQuote(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestEntryLineFormat(t *testing.T) {
	e := eventlog.Entry{Seq: 7, TS: time.Date(2026, 11, 22, 10, 1, 10, 123e6, time.Local), Event: "turn.start",
		Data: json.RawMessage(`{"turn":1,"prompt":"say hi","run_id":"r1","ids":["a"]}`)}
	want := `10:01:10.123  #7  turn.start  ids=["a"] prompt="say hi" run_id=r1 turn=1`
	if got := EntryLine(e); got != want {
		t.Errorf("entryLine =\n%s\nwant\n%s", got, want)
	}
}

func BenchmarkEntryLine(b *testing.B) {
	e := eventlog.Entry{Seq: 12, TS: time.Now(), Event: "message.enqueued",
		Data: json.RawMessage(`{"message_id":"0123456789abcdef0123456789abcdef","sender":"lead","recipient":"w1","kind":"request","payload":"` +
			strings.Repeat("lorem ipsum ", 40) + `","timestamp":"2026-11-22T10:01:10.123Z","reply_to":null,"metadata":{}}`)}
	b.ReportAllocs()
	for b.Loop() {
		_ = EntryLine(e)
	}
}

// TestPrintRunResultNamesRevokedWaitAndAbandonedRun: agent send prints,
// on stderr, what its message revoked or abandoned (issue 14).
func TestPrintRunResultNamesRevokedWaitAndAbandonedRun(t *testing.T) {
	var out, errb strings.Builder
	RunResult(&out, &errb, "lead", "", map[string]any{"response": "hi", "status": "idle",
		"revoked_wait": map[string]any{"token_id": "tok_0123", "kind": "approval"}, "abandoned_run": "run42"})
	if out.String() != "hi\n" {
		t.Errorf("stdout = %q, want the response only", out.String())
	}
	for _, want := range []string{"revoked lead's pending wait (approval, token id tok_0123)", "abandoned lead's run run42"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr = %q, want %q", errb.String(), want)
		}
	}
}

func TestComparePathsNaturally(t *testing.T) {
	in := []string{"lead-2", "lead/w10", "lead/w2/sub", "a", "lead/w2", "lead", "lead/w1", "lead/w01", "b9", "b10"}
	ms := make([]map[string]any, len(in))
	for i, p := range in {
		ms[i] = map[string]any{"path": p}
	}
	SortAgents(ms)
	var got []string
	for _, m := range ms {
		got = append(got, reply.Str(m, "path"))
	}
	want := "a b9 b10 lead lead/w1 lead/w01 lead/w2 lead/w2/sub lead/w10 lead-2"
	if strings.Join(got, " ") != want {
		t.Errorf("sorted = %q, want %q", strings.Join(got, " "), want)
	}
}

// TestClusterShowsWorkers: the active node's status lists each worker's
// pools (placed of size) and labels, sorted; an empty list says none; a
// standby's block (no "workers") prints no line.
func TestClusterShowsWorkers(t *testing.T) {
	var st map[string]any
	if err := json.Unmarshal([]byte(`{"node":"n1","role":"active","active_node":"n1","workers":[
		{"id":"gpu1","boot":"b","labels":{"zone":"lab","gpu":"1"},"pools":{"scripted":{"size":16,"placed":3},"claude":{"size":4,"placed":1}}},
		{"id":"w2","boot":"c","labels":{},"pools":{"scripted":{"size":2,"placed":0}}}]}`), &st); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	Cluster(&b, st)
	want := "cluster   node n1, active; active node n1\n" +
		"workers   gpu1: claude 1/4, scripted 3/16 [gpu=1,zone=lab]\n" +
		"          w2: scripted 0/2\n"
	if b.String() != want {
		t.Errorf("cluster =\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	Cluster(&b, map[string]any{"node": "n1", "role": "active", "active_node": "n1", "workers": []any{}})
	if !strings.Contains(b.String(), "workers   none") {
		t.Errorf("no workers: %q", b.String())
	}
	b.Reset()
	Cluster(&b, map[string]any{"node": "n2", "role": "standby", "active_node": "n1"})
	if strings.Contains(b.String(), "workers") {
		t.Errorf("a standby's block printed workers: %q", b.String())
	}
}
