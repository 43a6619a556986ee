package main

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
)

// BenchmarkLogsOffline measures `warren logs REF` (in process) on a
// 1000-entry log: name resolution from disk, reading, CRC checks, rendering.
func BenchmarkLogsOffline(b *testing.B) {
	home := b.TempDir()
	l, err := eventlog.Open(faultfs.OS{}, filepath.Join(home, "agents", leadID, "events.jsonl"), eventlog.Options{})
	if err != nil {
		b.Fatal(err)
	}
	recs := []eventlog.Record{{Event: "agent.created", Data: map[string]any{"agent_id": leadID, "name": "lead", "parent_id": nil}}}
	for i := range 999 {
		recs = append(recs, eventlog.Record{Event: "message.enqueued", Data: map[string]any{"message_id": i, "payload": strings.Repeat("lorem ", 20)}})
	}
	if _, err := l.AppendBatch(recs); err != nil {
		b.Fatal(err)
	}
	l.Close()
	b.ReportAllocs()
	for b.Loop() {
		if code := run(context.Background(), []string{"logs", "lead", "--home", home}, nil, io.Discard, io.Discard); code != 0 {
			b.Fatalf("exit %d", code)
		}
	}
}
