package eventlog

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/warren-dev/warren/faultfs"
)

// model is the test oracle: entry ids acknowledged, and ids that were in
// flight at a crash or whose append returned an error (maybe durable).
// Batches must be recovered all or none.
type model struct {
	path    string // the log's; memPath unless set
	next    int
	acked   map[int]bool
	maybe   map[int]bool
	batches [][]int
}

func newModel() *model {
	return &model{path: memPath, next: 1, acked: map[int]bool{}, maybe: map[int]bool{}}
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
func recovered(fsys faultfs.FS, path string) ([]int, error) {
	es, err := ReadAll(fsys, path)
	if err != nil {
		return nil, fmt.Errorf("ReadAll after recovery: %w", err)
	}
	ids := make([]int, len(es))
	for i, e := range es {
		if e.Seq != uint64(i+1) {
			return nil, fmt.Errorf("entry %d has seq %d: not a gap-free prefix", i, e.Seq)
		}
		var d struct{ ID int }
		if err := json.Unmarshal(e.Data, &d); err != nil {
			return nil, fmt.Errorf("entry %d data %s: %w", e.Seq, e.Data, err)
		}
		ids[i] = d.ID
	}
	return ids, nil
}

// check is checkErr for tests.
func (m *model) check(t testing.TB, fsys faultfs.FS) []int {
	t.Helper()
	ids, err := m.checkErr(fsys)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// checkErr opens the log (recovery), then checks acked ⊆ recovered ⊆
// acked ∪ maybe, no duplicates, batches all or none, that a second Open
// leaves the bytes unchanged, and that a power loss right after recovery
// changes nothing. Entries found become acked (they are durable now).
func (m *model) checkErr(fsys faultfs.FS) ([]int, error) {
	l, err := Open(fsys, m.path, Options{})
	if err != nil {
		return nil, fmt.Errorf("Open after crash: %w", err)
	}
	l.Close()
	ids, err := m.verify(fsys)
	if err != nil {
		return nil, err
	}
	before, err := faultfs.ReadFile(fsys, m.path)
	if err != nil {
		return nil, err
	}
	if l, err = Open(fsys, m.path, Options{}); err != nil {
		return nil, fmt.Errorf("second Open: %w", err)
	}
	l.Close()
	if after, _ := faultfs.ReadFile(fsys, m.path); string(after) != string(before) {
		return nil, errors.New("opening twice gave different bytes than once")
	}
	if mem, ok := fsys.(*faultfs.Mem); ok {
		mem.Crash()
		mem.Reboot(faultfs.RebootOptions{Mode: faultfs.PowerLoss})
		if after, _ := faultfs.ReadFile(fsys, m.path); string(after) != string(before) {
			return nil, fmt.Errorf("recovered log was not durable: power loss changed it from %d to %d bytes", len(before), len(after))
		}
	}
	return ids, nil
}

// verify checks the invariants on the log as it is and settles the model.
func (m *model) verify(fsys faultfs.FS) ([]int, error) {
	ids, err := recovered(fsys, m.path)
	if err != nil {
		return nil, err
	}
	seen := map[int]bool{}
	for _, id := range ids {
		if seen[id] {
			return nil, fmt.Errorf("entry id %d recovered twice", id)
		}
		seen[id] = true
		if !m.acked[id] && !m.maybe[id] {
			return nil, fmt.Errorf("entry id %d recovered but never appended", id)
		}
	}
	for id := range m.acked {
		if !seen[id] {
			return nil, fmt.Errorf("acknowledged entry id %d lost (recovered %v)", id, ids)
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
			return nil, fmt.Errorf("batch %v recovered in part (%d of %d)", b, n, len(b))
		}
	}
	// What was recovered is durable now; what was not is gone for good.
	m.acked = seen
	m.maybe = map[int]bool{}
	return ids, nil
}

// group runs writers concurrent goroutines on l, each appending each entries
// one by one (the first writer with one AppendBatch when batch is set),
// stopping at its first error.
func (m *model) group(l *Log, writers, each int, batch bool) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	record := func(ids []int, err error) {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range ids {
			if err != nil {
				m.maybe[id] = true
			} else {
				m.acked[id] = true
			}
		}
	}
	for w := 0; w < writers; w++ {
		ids := make([]int, each)
		for i := range ids {
			ids[i] = m.next
			m.next++
		}
		asBatch := batch && w == 0
		if asBatch {
			m.batches = append(m.batches, ids)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if asBatch {
				recs := make([]Record, len(ids))
				for i, id := range ids {
					recs[i] = Record{Event: "test.batch", Data: map[string]any{"id": id}}
				}
				_, err := l.AppendBatch(recs)
				record(ids, err)
				return
			}
			for i, id := range ids {
				_, err := l.Append("test.event", map[string]any{"id": id})
				if err != nil {
					record(ids[i:], err) // the rest were never appended: maybe is a superset
					return
				}
				record([]int{id}, nil)
			}
		}()
	}
	wg.Wait()
}
