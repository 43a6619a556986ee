package eventlog

import (
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"syscall"
	"testing"

	"github.com/warren-dev/warren/faultfs"
)

// countingFS counts the files open through it (now and at most) and the
// bytes read from them.
type countingFS struct {
	faultfs.FS
	mu       sync.Mutex
	open     int
	maxOpen  int
	readByte int64
}

type countingFile struct {
	faultfs.File
	c    *countingFS
	once sync.Once
}

func (c *countingFS) OpenFile(name string, flag int, perm fs.FileMode) (faultfs.File, error) {
	f, err := c.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.open++
	c.maxOpen = max(c.maxOpen, c.open)
	c.mu.Unlock()
	return &countingFile{File: f, c: c}, nil
}

func (f *countingFile) Close() error {
	f.once.Do(func() {
		f.c.mu.Lock()
		f.c.open--
		f.c.mu.Unlock()
	})
	return f.File.Close()
}

func (f *countingFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	f.c.mu.Lock()
	f.c.readByte += int64(n)
	f.c.mu.Unlock()
	return n, err
}

func (c *countingFS) stats() (open, maxOpen int, read int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open, c.maxOpen, c.readByte
}

// TestFilesCapsOpenHandles: many logs sharing a small Files cap keep
// working, in any order, while the files open at once stay within two per
// log the cap allows (a log and its pending file).
func TestFilesCapsOpenHandles(t *testing.T) {
	const logs, capLogs, rounds = 200, 8, 3
	cfs := &countingFS{FS: faultfs.NewMem()}
	files := NewFiles(capLogs)
	ls := make([]*Log, logs)
	path := func(i int) string { return fmt.Sprintf("/home/agents/a%d/events.jsonl", i) }
	for i := range ls {
		l, err := Open(cfs, path(i), Options{PendingIdle: -1, HealBackoff: -1, Files: files})
		if err != nil {
			t.Fatal(err)
		}
		ls[i] = l
	}
	for r := 0; r < rounds; r++ {
		for i, l := range ls {
			// A stride so that consecutive appends hit logs far apart.
			l = ls[(i*7+r)%logs]
			if _, err := l.Append("e", map[string]any{"r": r}); err != nil {
				t.Fatalf("round %d log %d: %v", r, i, err)
			}
			if n := files.Open(); n > capLogs {
				t.Fatalf("%d logs hold handles, cap %d", n, capLogs)
			}
		}
	}
	// Concurrent appends to every log.
	var wg sync.WaitGroup
	for _, l := range ls {
		wg.Add(1)
		go func(l *Log) {
			defer wg.Done()
			if _, err := l.Append("e", map[string]any{"r": rounds}); err != nil {
				t.Error(err)
			}
		}(l)
	}
	wg.Wait()
	_, maxOpen, _ := cfs.stats()
	// Sequential rounds keep the exact cap; concurrent commits may each
	// open their own for the duration of the commit (see Files).
	t.Logf("most files open at once: %d (cap %d logs)", maxOpen, capLogs)
	// The next sequential append brings the count back under the cap.
	if _, err := ls[0].Append("e", nil); err != nil {
		t.Fatal(err)
	}
	if n := files.Open(); n > capLogs {
		t.Fatalf("%d logs hold handles after the burst, cap %d", n, capLogs)
	}
	for i, l := range ls {
		want := uint64(rounds + 1)
		if i == 0 {
			want++
		}
		if got := l.LastSeq(); got != want {
			t.Fatalf("log %d LastSeq %d, want %d", i, got, want)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		es, err := ReadAll(cfs, path(i))
		if err != nil || uint64(len(es)) != want {
			t.Fatalf("log %d: %d entries, %v", i, len(es), err)
		}
	}
	if open, _, _ := cfs.stats(); open != 0 {
		t.Fatalf("%d files still open after closing every log", open)
	}
}

// TestFilesSequentialCapIsExact: appending to one log at a time, never
// more than 2 x cap files are open (counted at the filesystem).
func TestFilesSequentialCapIsExact(t *testing.T) {
	const logs, capLogs = 100, 4
	cfs := &countingFS{FS: faultfs.NewMem()}
	files := NewFiles(capLogs)
	var ls []*Log
	for i := 0; i < logs; i++ {
		l, err := Open(cfs, fmt.Sprintf("/h/agents/a%d/events.jsonl", i), Options{PendingIdle: -1, HealBackoff: -1, Files: files})
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		mustAppend(t, l, "created", nil)
	}
	for i := logs - 1; i >= 0; i-- {
		mustAppend(t, ls[i], "again", nil)
	}
	if _, maxOpen, _ := cfs.stats(); maxOpen > 2*capLogs {
		t.Fatalf("%d files were open at once; the cap allows %d (2 per log)", maxOpen, 2*capLogs)
	}
	for _, l := range ls {
		l.Close()
	}
}

// TestFilesReopenReadsOnlyTheTail: a log closed for the cap reopens without
// reading its entries again, only its last line.
func TestFilesReopenReadsOnlyTheTail(t *testing.T) {
	cfs := &countingFS{FS: faultfs.NewMem()}
	files := NewFiles(1)
	big, err := Open(cfs, "/h/agents/big/events.jsonl", Options{PendingIdle: -1, HealBackoff: -1, Files: files})
	if err != nil {
		t.Fatal(err)
	}
	defer big.Close()
	for i := 0; i < 2000; i++ {
		mustAppend(t, big, "e", map[string]any{"i": i, "pad": "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"})
	}
	other, err := Open(cfs, "/h/agents/other/events.jsonl", Options{PendingIdle: -1, HealBackoff: -1, Files: files})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	mustAppend(t, other, "e", nil) // closes big's handles
	_, _, before := cfs.stats()
	mustAppend(t, big, "e", nil) // reopens big
	_, _, after := cfs.stats()
	size := len(readBytes(t, cfs, "/h/agents/big/events.jsonl"))
	if read := after - before; read > 8<<10 {
		t.Fatalf("reopening a %d-byte log read %d bytes", size, read)
	}
	if big.LastSeq() != 2001 {
		t.Fatalf("LastSeq %d", big.LastSeq())
	}
}

// TestFilesReopenFailureHeals: a reopen for the cap that fails (EMFILE)
// refuses that append without writing anything and heals like any fault.
func TestFilesReopenFailureHeals(t *testing.T) {
	m := faultfs.NewMem()
	files := NewFiles(1)
	a := mustOpenFiles(t, m, "/h/agents/a/events.jsonl", files)
	defer a.Close()
	b := mustOpenFiles(t, m, "/h/agents/b/events.jsonl", files)
	defer b.Close()
	mustAppend(t, a, "a1", nil)
	mustAppend(t, b, "b1", nil) // closes a's handles
	m.Inject(faultfs.Rule{Kind: faultfs.OpOpen, Path: "/a/events.jsonl", Err: syscall.EMFILE, Sticky: true})
	if _, err := a.Append("a2", nil); !errors.Is(err, syscall.EMFILE) || !errors.Is(err, ErrPoisoned) {
		t.Fatalf("append with EMFILE on reopen: %v", err)
	}
	if a.Degraded() == nil {
		t.Fatal("not degraded after a failed reopen")
	}
	m.ClearRules()
	if err := a.Heal(); err != nil {
		t.Fatal(err)
	}
	if e := mustAppend(t, a, "a3", nil); e.Seq != 2 {
		t.Fatalf("seq %d after heal, want 2", e.Seq)
	}
}

func mustOpenFiles(t *testing.T, fsys faultfs.FS, path string, files *Files) *Log {
	t.Helper()
	l, err := Open(fsys, path, Options{PendingIdle: -1, HealBackoff: -1, Files: files})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestFilesReopenDetectsChange: a log changed on disk while its handles
// were closed is not appended to (ErrChanged), and nothing is written.
func TestFilesReopenDetectsChange(t *testing.T) {
	m := faultfs.NewMem()
	files := NewFiles(1)
	a := mustOpenFiles(t, m, "/h/agents/a/events.jsonl", files)
	defer a.Close()
	b := mustOpenFiles(t, m, "/h/agents/b/events.jsonl", files)
	defer b.Close()
	mustAppend(t, a, "a1", nil)
	mustAppend(t, a, "a2", nil)
	mustAppend(t, b, "b1", nil) // closes a's handles
	full := readBytes(t, m, "/h/agents/a/events.jsonl")
	cut := full[:lineEnds(full)[0]]
	writeBytes(t, m, "/h/agents/a/events.jsonl", cut)
	if _, err := a.Append("a3", nil); !errors.Is(err, ErrChanged) {
		t.Fatalf("append to a changed log: %v, want ErrChanged", err)
	}
	if got := readBytes(t, m, "/h/agents/a/events.jsonl"); len(got) != len(cut) {
		t.Fatalf("a changed log was written to: %d bytes, want %d", len(got), len(cut))
	}
}
