package eventlog

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"testing"
	"time"

	"github.com/warren-dev/warren/faultfs"
)

func tempLog(t testing.TB) (faultfs.FS, string) {
	t.Helper()
	return faultfs.OS{}, filepath.Join(t.TempDir(), "agents", "a1", "events.jsonl")
}

// mustOpen opens a log without the idle timer, so tests see a deterministic
// sequence of operations (retireNow runs the idle removal on demand), and
// with a heal backoff no test outlasts: a poisoned handle reopens only when
// the test calls Heal.
func mustOpen(t testing.TB, fsys faultfs.FS, path string) *Log {
	t.Helper()
	return mustOpenOpts(t, fsys, path, Options{PendingIdle: -1, HealBackoff: time.Hour})
}

// mustOpenOpts opens path with o or fails the test.
func mustOpenOpts(t testing.TB, fsys faultfs.FS, path string, o Options) *Log {
	t.Helper()
	l, err := Open(fsys, path, o)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	return l
}

func mustAppend(t testing.TB, l *Log, event string, data any) Entry {
	t.Helper()
	e, err := l.Append(event, data)
	if err != nil {
		t.Fatalf("Append(%s): %v", event, err)
	}
	return e
}

func readBytes(t testing.TB, fsys faultfs.FS, path string) []byte {
	t.Helper()
	b, err := faultfs.ReadFile(fsys, path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return b
}

func writeBytes(t testing.TB, fsys faultfs.FS, path string, b []byte) {
	t.Helper()
	if err := faultfs.WriteFile(fsys, path, b, 0o600); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
}

// lineEnds returns the offset just past each line of b.
func lineEnds(b []byte) []int {
	var ends []int
	for i := 0; i < len(b); {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			break
		}
		i += j + 1
		ends = append(ends, i)
	}
	return ends
}

// makeLog writes n entries with event "e<i>" and returns the file bytes.
func makeLog(t testing.TB, fsys faultfs.FS, path string, n int) []byte {
	t.Helper()
	l := mustOpen(t, fsys, path)
	for i := 1; i <= n; i++ {
		mustAppend(t, l, "test.event", map[string]any{"i": i, "pad": "xxxxxxxxxx"})
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return readBytes(t, fsys, path)
}

var fixedTS = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// crcLine frames body (a JSON object without its closing brace) as a line
// with a valid CRC.
func crcLine(body string) []byte {
	sum := crc32.Checksum([]byte(body), crc32.MakeTable(crc32.Castagnoli))
	return []byte(body + fmt.Sprintf(`,"crc":"%08x"}`, sum) + "\n")
}

// retireNow runs the pending file's idle removal as if PendingIdle had
// passed since the last group.
func retireNow(l *Log) {
	l.mu.Lock()
	l.lastGroup = time.Time{}
	l.mu.Unlock()
	l.retirePending()
}
