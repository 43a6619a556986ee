package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestLogsResolvesAsTheDaemon: once a name has been reused, warren logs
// resolves REF as the daemon does: the live agent first (never one of the
// terminated agents that had the same path), an ambiguous live name is an
// error listing the paths, and terminated agents are found only when no
// live one matches (several: an error listing their ids).
func TestLogsResolvesAsTheDaemon(t *testing.T) {
	home := shortHome(t)
	writeTeam(t, home).Close() // lead (live), lead/w1 (live, workerID)
	id := func(i int) string { return fmt.Sprintf("%032x", 0xabc000+i) }
	created := func(aid, name string, parent any, terminated bool) {
		l := openLog(t, home, aid)
		appendOK(t, l, "agent.created", map[string]any{"agent_id": aid, "name": name, "parent_id": parent, "instructions": "",
			"provider": "inproc", "model": "echo", "metadata": map[string]any{}})
		if terminated {
			appendOK(t, l, "agent.terminated", map[string]any{"agent_id": aid})
		}
		l.Close()
	}
	for i := 0; i < 6; i++ { // earlier lead/w1s, terminated
		created(id(i), "w1", leadID, true)
	}
	created(id(10), "gone", nil, true)
	created(id(11), "gone", leadID, true)
	created(id(12), "old", nil, true)
	want := filepath.Join(home, "agents", workerID, "events.jsonl")
	for _, ref := range []string{"w1", "lead/w1", "/lead/w1"} {
		for i := 0; i < 5; i++ {
			if got, err := agentLogPath(home, ref); err != nil || got != want {
				t.Fatalf("agentLogPath(%q) = %s, %v; want the live agent's log %s", ref, got, err, want)
			}
		}
	}
	if got, err := agentLogPath(home, "old"); err != nil || got != filepath.Join(home, "agents", id(12), "events.jsonl") {
		t.Fatalf("agentLogPath(old) = %s, %v; want the only (terminated) agent of that name", got, err)
	}
	_, err := agentLogPath(home, "gone")
	if err == nil || !strings.Contains(err.Error(), id(10)) || !strings.Contains(err.Error(), id(11)) {
		t.Fatalf("agentLogPath(gone) = %v; want an error listing both terminated agents' ids", err)
	}
	// A second live w1 elsewhere makes the bare name ambiguous.
	created(id(20), "boss", nil, false)
	created(id(21), "w1", id(20), false)
	_, err = agentLogPath(home, "w1")
	if err == nil || !strings.Contains(err.Error(), "/lead/w1") || !strings.Contains(err.Error(), "/boss/w1") || !strings.Contains(err.Error(), "ambiguous") {
		t.Fatalf("agentLogPath(w1) with two live w1 = %v; want an ambiguity error listing both paths", err)
	}
	if got, err := agentLogPath(home, "boss/w1"); err != nil || got != filepath.Join(home, "agents", id(21), "events.jsonl") {
		t.Fatalf("agentLogPath(boss/w1) = %s, %v", got, err)
	}
}
