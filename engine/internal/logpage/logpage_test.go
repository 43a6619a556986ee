package logpage

import (
	"io"
	"testing"

	"github.com/warren-dev/warren/eventlog"
)

type sliceReader struct{ es []eventlog.Entry }

func (r *sliceReader) Next() (eventlog.Entry, error) {
	if len(r.es) == 0 {
		return eventlog.Entry{}, io.EOF
	}
	e := r.es[0]
	r.es = r.es[1:]
	return e, nil
}
func (r *sliceReader) Close() error { return nil }

func entries(n, size int) []eventlog.Entry {
	var es []eventlog.Entry
	for i := 1; i <= n; i++ {
		es = append(es, eventlog.Entry{Seq: uint64(i), Off: int64(i * 100), Data: make([]byte, size)})
	}
	return es
}

// A page ends at the limit or, beyond its first entry, past the byte
// bound; where the next page starts is remembered; the last page says no
// more follow.
func TestReadPages(t *testing.T) {
	var cur Cursors
	page, more, err := Read(&sliceReader{entries(5, 10)}, 2, 1000, &cur)
	if err != nil || len(page) != 2 || !more || cur.Off(3) != 300 {
		t.Fatalf("limit 2: %d entries, more %v, cursor %d, err %v", len(page), more, cur.Off(3), err)
	}
	page, more, _ = Read(&sliceReader{entries(5, 10)}, 10, 25, &cur)
	if len(page) != 2 || !more || cur.Off(3) != 300 {
		t.Fatalf("25 bytes: %d entries, more %v", len(page), more)
	}
	page, more, _ = Read(&sliceReader{entries(1, 100)}, 10, 25, &cur)
	if len(page) != 1 || more {
		t.Fatalf("one large entry: %d entries, more %v; want it alone and no more", len(page), more)
	}
	for i := 0; i < 20; i++ {
		cur.remember(uint64(100+i), 1)
	}
	cur.mu.Lock()
	n := len(cur.m)
	cur.mu.Unlock()
	if n > maxCursors {
		t.Fatalf("%d cursors kept, want at most %d", n, maxCursors)
	}
}
