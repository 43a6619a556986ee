package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/inproc"
)

// TestToolLogsGolden: a fixed set of tool calls, outside and inside a turn
// (one by one and as one model step), writes the logs recorded in
// testdata/toollogs.golden, byte for byte once the values that differ
// from run to run (random ids, times, CRCs) are replaced by placeholders
// numbered in order of appearance. The golden file was written by the
// daemon before the tools moved to package toolexec; regenerate it with
// WARREN_GOLDEN=update only for an intended change of the log.
func TestToolLogsGolden(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.noWake = true })
	h.prov.Register("golden", func(_ context.Context, tr *inproc.Turn) (string, error) {
		calls := []struct {
			tool string
			args map[string]any
		}{
			{"send_message", map[string]any{"recipient": "w1", "text": "in a turn"}},
			{"broadcast", map[string]any{"text": "nobody"}},
			{"spawn_agent", map[string]any{"name": "w3", "instructions": "help", "metadata": map[string]any{"k": "v"}}},
			{"check_inbox", nil},
			{"list_children", nil},
			{"remind_me", map[string]any{"reason": "later", "timeout": 86400}},
			{"send_message", map[string]any{"recipient": "ghost", "text": "x"}},
			{"gate", map[string]any{"agent_name": "w2"}},
		}
		for _, c := range calls {
			if _, err := tr.Call(c.tool, c.args); err != nil {
				return "", err
			}
		}
		if _, err := tr.CallBatch([]provider.ToolRequest{
			{Tool: "send_message", Args: map[string]any{"recipient": "w1", "text": "step 1"}},
			{Tool: "send_message", Args: map[string]any{"recipient": "w2", "text": "step 2"}},
			{Tool: "send_message", Args: map[string]any{"recipient": "w1", "text": "step 3"}},
		}); err != nil {
			return "", err
		}
		return "done", nil
	})
	lead := h.create("lead", "", "golden")
	w1 := h.create("w1", lead, "echo")
	w2 := h.create("w2", lead, "echo")
	ops := []struct {
		self, tool string
		args       map[string]any
	}{
		{lead, "send_message", map[string]any{"recipient": "w1", "text": "hello"}},
		{lead, "send_message", map[string]any{"recipient": "USER", "text": "hi operator"}},
		{w1, "send_message", map[string]any{"recipient": "USER", "text": "refused"}},
		{w1, "broadcast", map[string]any{"text": "to w2"}},
		{w2, "check_inbox", map[string]any{"sender": "w1"}},
		{w1, "send_message", map[string]any{"recipient": "lead", "text": "report"}},
		{lead, "inspect_agent", map[string]any{"name": "w1"}},
		{lead, "list_children", nil},
		{lead, "set_agent_metadata", map[string]any{"agent_name": "w1", "key": "role", "value": "scout"}},
		{lead, "set_agent_metadata", map[string]any{"agent_name": "w1", "key": "role", "value": nil}},
		{lead, "gate", map[string]any{"agent_name": "w1"}},
		{lead, "permit_turn", map[string]any{"agent_name": "w1"}},
		{lead, "ungate", map[string]any{"agent_name": "w1"}},
		{lead, "poke", map[string]any{"agent_name": "w2"}},
		{w1, "remind_me", map[string]any{"reason": "check", "timeout": 86400, "every": 3600}},
		{w1, "cancel_reminder", map[string]any{"reminder_id": "nope"}},
		{w1, "subscribe", map[string]any{"agent_name": "w2", "transition": "busy->idle", "once": true}},
		{w1, "unsubscribe", map[string]any{"subscription_id": "nope"}},
		{lead, "spawn_agent", map[string]any{"name": "w4", "instructions": "now"}},
		{lead, "await_input", map[string]any{"kind": "approval", "prompt": "?", "timeout": 5}},
		{lead, "no_such_tool", nil},
		{w2, "complete", map[string]any{"result": "finished"}},
	}
	for _, op := range ops {
		h.tool(op.self, op.tool, op.args)
	}
	if res := h.send(lead, "go"); res.Err != nil {
		t.Fatalf("the turn: %v", res.Err)
	}
	if err := h.c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.c = nil
	var b strings.Builder
	for _, name := range []string{"lead", "w1", "w2", "w3", "w4"} {
		fmt.Fprintf(&b, "== %s\n", name)
		b.WriteString(goldenLog(t, h.fs, name))
	}
	fmt.Fprintf(&b, "== USER\n")
	b.Write(memFile(t, h.fs, "/home/user.jsonl"))
	got := normalizeLog(b.String())
	const path = "testdata/toollogs.golden"
	if os.Getenv("WARREN_GOLDEN") == "update" {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("the logs differ from %s at line %d:\n got %s\nwant %s", path, i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("the logs have %d lines, %s %d", len(gl), path, len(wl))
	}
}

// goldenLog is the log of the agent named name (found by its agent.created
// entry).
func goldenLog(t *testing.T, fsys *faultfs.Mem, name string) string {
	t.Helper()
	dirs, err := fsys.ReadDir("/home/agents")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		data := memFile(t, fsys, "/home/agents/"+d.Name()+"/events.jsonl")
		first, _, _ := strings.Cut(string(data), "\n")
		var e struct {
			Data struct {
				Name string `json:"name"`
			} `json:"data"`
		}
		if json.Unmarshal([]byte(first), &e) == nil && e.Data.Name == name {
			return string(data)
		}
	}
	t.Fatalf("no log of an agent named %s", name)
	return ""
}

// memFile reads a whole file of the in-memory filesystem.
func memFile(t *testing.T, fsys faultfs.FS, path string) []byte {
	t.Helper()
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

var (
	goldenHex  = regexp.MustCompile(`[0-9a-f]{32}`)
	goldenTime = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)
	goldenCRC  = regexp.MustCompile(`"crc":"[0-9a-f]{8}"`)
	goldenMS   = regexp.MustCompile(`"(duration_ms|elapsed_ms|latency_ms)":\d+`)
)

// normalizeLog replaces ids by ID<n> (numbered in order of appearance),
// times by TIME, CRCs by CRC and durations by MS.
func normalizeLog(s string) string {
	ids := map[string]string{}
	s = goldenHex.ReplaceAllStringFunc(s, func(id string) string {
		if n, ok := ids[id]; ok {
			return n
		}
		ids[id] = fmt.Sprintf("ID%d", len(ids)+1)
		return ids[id]
	})
	s = goldenTime.ReplaceAllString(s, "TIME")
	s = goldenCRC.ReplaceAllString(s, `"crc":"CRC"`)
	return goldenMS.ReplaceAllString(s, `"$1":MS`)
}
