package eventlog

import (
	"encoding/json"
	"testing"

	"github.com/warren-dev/warren/faultfs"
)

// model is the test oracle: entry ids acknowledged, and ids that were in
// flight at a crash or whose append returned an error (maybe durable).
// Batches must be recovered all or none.
type model struct {
	next    int
	acked   map[int]bool
	maybe   map[int]bool
	batches [][]int
}

func newModel() *model {
	return &model{next: 1, acked: map[int]bool{}, maybe: map[int]bool{}}
}

// append appends one entry sequentially and records the outcome.
func (m *model) append(t testing.TB, l *Log) error {
	id := m.next
	m.next++
	_, err := l.Append("test.event", map[string]any{"id": id})
	if err != nil {
		m.maybe[id] = true
		return err
	}
	m.acked[id] = true
	return nil
}

// batch appends n entries with AppendBatch.
func (m *model) batch(l *Log, n int) error {
	var recs []Record
	var ids []int
	for i := 0; i < n; i++ {
		recs = append(recs, Record{Event: "test.batch", Data: map[string]any{"id": m.next}})
		ids = append(ids, m.next)
		m.next++
	}
	m.batches = append(m.batches, ids)
	_, err := l.AppendBatch(recs)
	for _, id := range ids {
		if err != nil {
			m.maybe[id] = true
		} else {
			m.acked[id] = true
		}
	}
	return err
}

// recovered reads the log and returns the entry ids in seq order, checking
// the seqs run 1..n.
func recovered(t testing.TB, fsys faultfs.FS, path string) []int {
	t.Helper()
	es, err := ReadAll(fsys, path)
	if err != nil {
		t.Fatalf("ReadAll after recovery: %v", err)
	}
	ids := make([]int, len(es))
	for i, e := range es {
		if e.Seq != uint64(i+1) {
			t.Fatalf("entry %d has seq %d: not a gap-free prefix", i, e.Seq)
		}
		var d struct{ ID int }
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatalf("entry %d data %s: %v", e.Seq, e.Data, err)
		}
		ids[i] = d.ID
	}
	return ids
}

// check opens the log (recovery), then asserts acked ⊆ recovered ⊆ acked ∪
// maybe, no duplicates, batches all or none, and that a second Open leaves
// the bytes unchanged. Entries found are promoted to acked (they are
// durable now). It returns the recovered ids.
func (m *model) check(t testing.TB, fsys faultfs.FS) []int {
	t.Helper()
	l, err := Open(fsys, memPath, Options{})
	if err != nil {
		t.Fatalf("Open after crash: %v", err)
	}
	l.Close()
	ids := m.verify(t, fsys)
	before := readBytes(t, fsys, memPath)
	l, err = Open(fsys, memPath, Options{})
	if err != nil {
		t.Fatalf("second Open: %v", err)
	}
	l.Close()
	if after := readBytes(t, fsys, memPath); string(after) != string(before) {
		t.Fatal("opening twice gave different bytes than once")
	}
	// Recovery made what it found durable: a power loss keeping only
	// synced data changes nothing.
	if mem, ok := fsys.(*faultfs.Mem); ok {
		mem.Crash()
		mem.Reboot(faultfs.RebootOptions{Mode: faultfs.PowerLoss})
		if after := readBytes(t, fsys, memPath); string(after) != string(before) {
			t.Fatalf("recovered log was not durable: power loss changed it from %d to %d bytes", len(before), len(after))
		}
	}
	return ids
}

// verify checks the invariants on the log as it is and settles the model.
func (m *model) verify(t testing.TB, fsys faultfs.FS) []int {
	t.Helper()
	ids := recovered(t, fsys, memPath)
	seen := map[int]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Fatalf("entry id %d recovered twice", id)
		}
		seen[id] = true
		if !m.acked[id] && !m.maybe[id] {
			t.Fatalf("entry id %d recovered but never appended", id)
		}
	}
	for id := range m.acked {
		if !seen[id] {
			t.Fatalf("acknowledged entry id %d lost (recovered %v)", id, ids)
		}
	}
	for _, b := range m.batches {
		n := 0
		for _, id := range b {
			if seen[id] {
				n++
			}
		}
		if n != 0 && n != len(b) {
			t.Fatalf("batch %v recovered in part (%d of %d)", b, n, len(b))
		}
	}
	// What was recovered is durable now; what was not is gone for good.
	m.acked = seen
	m.maybe = map[int]bool{}
	return ids
}
