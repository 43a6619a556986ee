package eventlog

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"sync"
	"testing"
	"time"
)

// openWithRetireSignal opens a real-disk log with a short idle time and a
// channel that receives after each idle removal.
func openWithRetireSignal(t *testing.T, idle time.Duration) (*Log, string, chan struct{}) {
	t.Helper()
	fsys, path := tempLog(t)
	l, err := Open(fsys, path, Options{PendingIdle: idle})
	if err != nil {
		t.Fatal(err)
	}
	retired := make(chan struct{}, 1000)
	l.mu.Lock()
	l.retired = func() { retired <- struct{}{} }
	l.mu.Unlock()
	return l, path, retired
}

func waitRetired(t *testing.T, retired chan struct{}) {
	t.Helper()
	select {
	case <-retired:
	case <-time.After(10 * time.Second):
		t.Fatal("the idle pending file was never removed")
	}
}

func pendingExists(t *testing.T, path string) bool {
	t.Helper()
	_, err := os.Stat(PendingPath(path))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

func TestIdlePendingFileIsRemoved(t *testing.T) {
	l, path, retired := openWithRetireSignal(t, 20*time.Millisecond)
	defer l.Close()
	for round := 0; round < 2; round++ {
		mustAppend(t, l, "busy", map[string]int{"round": round})
		// Nothing retires while a group is younger than the idle time, so
		// the file is still there straight after the append.
		if !pendingExists(t, path) {
			t.Fatalf("round %d: pending file gone right after an append", round)
		}
		waitRetired(t, retired)
		if pendingExists(t, path) {
			t.Fatalf("round %d: pending file still there after the idle removal", round)
		}
	}
	es, err := ReadAll(l.fsys, path)
	if err != nil || len(es) != 2 {
		t.Fatalf("entries %v %v", es, err)
	}
}

func TestIdleRemovalRacesAppendsSafely(t *testing.T) {
	// An idle time of a microsecond makes the removal compete with the
	// appenders all the time; every append must still land once, in order.
	l, path, _ := openWithRetireSignal(t, time.Microsecond)
	const writers, each = 8, 40
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if _, err := l.Append("race", map[string]int{"w": w, "i": i}); err != nil {
					t.Error(err)
					return
				}
				if i%10 == 9 {
					if _, err := l.AppendBatch([]Record{{Event: "b1"}, {Event: "b2"}}); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	es, err := ReadAll(l.fsys, path)
	if err != nil {
		t.Fatal(err)
	}
	if want := writers * (each + 2*each/10); len(es) != want {
		t.Fatalf("%d entries, want %d", len(es), want)
	}
	next := map[int]int{}
	for _, e := range es {
		if e.Event != "race" {
			continue
		}
		var d struct{ W, I int }
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatal(err)
		}
		w, i := d.W, d.I
		if i != next[w] {
			t.Fatalf("writer %d: entry %d after %d", w, i, next[w]-1)
		}
		next[w]++
	}
	if pendingExists(t, path) {
		t.Fatal("pending file left after Close")
	}
}
