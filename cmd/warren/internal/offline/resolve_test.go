package offline

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
)

// TestLogsResolvesAsTheDaemon: once a name has been reused, warren logs
// resolves REF as the daemon does: the live agent first (never one of the
// terminated agents that had the same path), an ambiguous live name is an
// error listing the paths, and terminated agents are found only when no
// live one matches (several: an error listing their ids).
func TestLogsResolvesAsTheDaemon(t *testing.T) {
	const (
		leadID   = "0123456789abcdef0123456789abcdef"
		workerID = "fedcba9876543210fedcba9876543210"
	)
	home := t.TempDir()
	id := func(i int) string { return fmt.Sprintf("%032x", 0xabc000+i) }
	created := func(aid, name string, parent any, terminated bool) {
		l, err := eventlog.Open(faultfs.OS{}, filepath.Join(home, "agents", aid, "events.jsonl"), eventlog.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		recs := []eventlog.Record{{Event: "agent.created", Data: map[string]any{"agent_id": aid, "name": name, "parent_id": parent,
			"instructions": "", "provider": "inproc", "model": "echo", "metadata": map[string]any{}}}}
		if terminated {
			recs = append(recs, eventlog.Record{Event: "agent.terminated", Data: map[string]any{"agent_id": aid}})
		}
		if _, err := l.AppendBatch(recs); err != nil {
			t.Fatal(err)
		}
	}
	created(leadID, "lead", nil, false)    // lead (live)
	created(workerID, "w1", leadID, false) // lead/w1 (live)
	for i := 0; i < 6; i++ {               // earlier lead/w1s, terminated
		created(id(i), "w1", leadID, true)
	}
	created(id(10), "gone", nil, true)
	created(id(11), "gone", leadID, true)
	created(id(12), "old", nil, true)
	want := filepath.Join(home, "agents", workerID, "events.jsonl")
	for _, ref := range []string{"w1", "lead/w1", "/lead/w1"} {
		for i := 0; i < 5; i++ {
			if got, err := LogPath(home, ref); err != nil || got != want {
				t.Fatalf("LogPath(%q) = %s, %v; want the live agent's log %s", ref, got, err, want)
			}
		}
	}
	if got, err := LogPath(home, "old"); err != nil || got != filepath.Join(home, "agents", id(12), "events.jsonl") {
		t.Fatalf("LogPath(old) = %s, %v; want the only (terminated) agent of that name", got, err)
	}
	_, err := LogPath(home, "gone")
	if err == nil || !strings.Contains(err.Error(), id(10)) || !strings.Contains(err.Error(), id(11)) {
		t.Fatalf("LogPath(gone) = %v; want an error listing both terminated agents' ids", err)
	}
	// A second live w1 elsewhere makes the bare name ambiguous.
	created(id(20), "boss", nil, false)
	created(id(21), "w1", id(20), false)
	_, err = LogPath(home, "w1")
	if err == nil || !strings.Contains(err.Error(), "/lead/w1") || !strings.Contains(err.Error(), "/boss/w1") || !strings.Contains(err.Error(), "ambiguous") {
		t.Fatalf("LogPath(w1) with two live w1 = %v; want an ambiguity error listing both paths", err)
	}
	if got, err := LogPath(home, "boss/w1"); err != nil || got != filepath.Join(home, "agents", id(21), "events.jsonl") {
		t.Fatalf("LogPath(boss/w1) = %s, %v", got, err)
	}
}
