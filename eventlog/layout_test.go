package eventlog

import (
	"fmt"
	"testing"

	"github.com/warren-dev/warren/faultfs"
)

// Entries returned by ReadAll must own their data: the scanner reuses its
// read buffer (a regression: the fast path once aliased it).
func TestReadAllEntriesOwnTheirData(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/events.jsonl"
	l, err := Open(faultfs.OS{}, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	recs := make([]Record, 3000)
	for i := range recs {
		recs[i] = Record{Event: "e", Data: map[string]any{"i": i, "pad": fmt.Sprintf("%0200d", i)}}
	}
	es, err := l.AppendBatch(recs)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]string, len(es))
	for i, e := range es {
		want[i] = string(e.Data)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	all, err := ReadAll(faultfs.OS{}, path)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range all {
		if string(e.Data) != want[i] {
			t.Fatalf("entry %d data %.60s..., want %.60s...: entries alias a reused buffer", i, e.Data, want[i])
		}
	}
}
