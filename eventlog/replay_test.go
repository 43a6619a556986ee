package eventlog

import (
	"testing"

	"github.com/warren-dev/warren/faultfs"
)

func TestOpenReplaysEveryEntryOnceIncludingPending(t *testing.T) {
	mem := faultfs.NewMem()
	l, err := Open(mem, "/d/events.jsonl", Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := l.Append("e", map[string]any{"i": i}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// A pending file holding seq 4, as a crash after the pending fsync
	// leaves it: write it with a second log on a copy, crashing before
	// the append to the log file.
	l2, err := Open(mem, "/d/events.jsonl", Options{})
	if err != nil {
		t.Fatal(err)
	}
	mem.Inject(faultfs.Rule{Kind: faultfs.OpWrite, Path: "/events.jsonl", Nth: 1, Crash: true})
	_, _ = l2.Append("e", map[string]any{"i": 3})
	mem.ClearRules()
	mem.Reboot(faultfs.RebootOptions{Mode: faultfs.ProcessCrash})
	if ok, _ := faultfs.Exists(mem, "/d/events.pending"); !ok {
		t.Fatalf("setup: no pending file left")
	}
	var seqs []uint64
	l3, err := Open(mem, "/d/events.jsonl", Options{Replay: func(e Entry) error {
		seqs = append(seqs, e.Seq)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer l3.Close()
	if len(seqs) != 4 || seqs[0] != 1 || seqs[3] != 4 {
		t.Fatalf("replayed seqs %v, want 1..4 (the log then the pending record)", seqs)
	}
	all, err := ReadAll(mem, "/d/events.jsonl")
	if err != nil || len(all) != 4 {
		t.Fatalf("ReadAll after replay: %d entries, %v", len(all), err)
	}
}
