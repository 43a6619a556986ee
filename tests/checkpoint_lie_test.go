package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warren-dev/warren/checkpoint"
)

// TestLyingCheckpointDropsNoMessage (issue 31, D2, process level, the
// adversary's reproduction): a gated agent holds three acknowledged
// messages; with the daemon stopped, its checkpoint.json is edited to
// drop them and its sum recomputed. The next start does not trust it: it
// warns, folds the log, and the three messages are pending.
func TestLyingCheckpointDropsNoMessage(t *testing.T) {
	t.Parallel()
	d := startTestDaemon(t, modeBinary)
	lead := d.createAgent("lead", "inproc", "echo", "")
	kid := d.createAgent("kid", "inproc", "echo", "lead")
	d.callN("tool.call", map[string]any{"agent_id": lead, "tool": "gate", "arguments": map[string]any{"agent_name": "kid"}})
	for i := 0; i < 3; i++ {
		d.callN("tool.call", map[string]any{"agent_id": lead, "tool": "send_message",
			"arguments": map[string]any{"recipient": "kid", "text": fmt.Sprintf("acknowledged %d", i)}})
	}
	if err := d.Stop(); err != nil { // a clean stop writes every checkpoint
		t.Fatal(err)
	}
	path := filepath.Join(d.Home, "agents", kid, checkpoint.Name)
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, r, err := checkpoint.Decode(file)
	if err != nil {
		t.Fatalf("the checkpoint the stop wrote: %v", err)
	}
	_, body, _ := bytes.Cut(file, []byte{'\n'})
	line, ids, _ := bytes.Cut(body, []byte{'\n'})
	var doc map[string]any
	if err := json.Unmarshal(line, &doc); err != nil {
		t.Fatal(err)
	}
	if pend, _ := doc["pending"].([]any); len(pend) != 3 {
		t.Fatalf("the checkpoint lists %d pending messages, want 3", len(pend))
	}
	doc["pending"] = []any{}
	line, err = json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	lie := checkpoint.Encode(append(append(line, '\n'), ids...), r)
	if _, _, err := checkpoint.Decode(lie); err != nil {
		t.Fatalf("the lying checkpoint does not pass its own checks: %v", err)
	}
	if err := os.WriteFile(path, lie, 0o600); err != nil {
		t.Fatal(err)
	}

	d.Start()
	ins := d.callN("agent.inspect", map[string]any{"agent_id": kid})
	got := toJSON(t, ins["inbox"])
	for i := 0; i < 3; i++ {
		if !strings.Contains(got, fmt.Sprintf("acknowledged %d", i)) {
			t.Fatalf("message %d is not pending after the start: inbox %s", i, got)
		}
	}
	if out := d.Output(); !strings.Contains(out, "checkpoint disagrees with the log") {
		t.Fatalf("the start gave no warning about the checkpoint:\n%s", out)
	}
}
