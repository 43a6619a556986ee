package engine

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/store"
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
	var cur logCursors
	page, next, more, err := readPage(&sliceReader{entries(5, 10)}, 2, 1000)
	if err != nil || len(page) != 2 || !more || next.Seq != 3 || next.Off != 300 {
		t.Fatalf("limit 2: %d entries, more %v, next %d at %d, err %v", len(page), more, next.Seq, next.Off, err)
	}
	page, next, more, _ = readPage(&sliceReader{entries(5, 10)}, 10, 25)
	if len(page) != 2 || !more || next.Seq != 3 {
		t.Fatalf("25 bytes: %d entries, more %v", len(page), more)
	}
	page, _, more, _ = readPage(&sliceReader{entries(1, 100)}, 10, 25)
	if len(page) != 1 || more {
		t.Fatalf("one large entry: %d entries, more %v; want it alone and no more", len(page), more)
	}
	for i := 0; i < 20; i++ {
		cur.remember(uint64(100+i), 1)
	}
	if n := len(cur.m); n > maxCursors {
		t.Fatalf("%d cursors kept, want at most %d", n, maxCursors)
	}
	cur.remember(3, 300)
	if cur.Off(3) != 300 || cur.Off(4) != 0 {
		t.Fatalf("cursor at 3 = %d, at 4 = %d; want 300 and unknown", cur.Off(3), cur.Off(4))
	}
}

// readLogPage opens the log where the previous page said the next starts; allPages
// reads page after page to the end, and stops at the first error.
func TestPageAndAll(t *testing.T) {
	a1, b2 := newAgent("a1", nil, newProjection()), newAgent("b2", nil, newProjection())
	var hints []int64
	log := entries(5, 10)
	open := func(_ context.Context, id string, from uint64, hint int64) (store.Reader, error) {
		if id != "a1" {
			return nil, errors.New("no such log " + id)
		}
		hints = append(hints, hint)
		return &sliceReader{log[from-1:]}, nil
	}
	all, err := allPages(1, func(from uint64) ([]eventlog.Entry, bool, error) {
		return readLogPage(context.Background(), open, a1, from, 2, 1000)
	})
	if err != nil || len(all) != 5 || all[4].Seq != 5 {
		t.Fatalf("allPages = %d entries (last %v), err %v; want 5", len(all), all, err)
	}
	if want := []int64{0, 300, 500}; len(hints) != 3 || hints[0] != want[0] || hints[1] != want[1] || hints[2] != want[2] {
		t.Errorf("opened at offsets %v, want %v (each page where the last said)", hints, want)
	}
	if _, _, err := readLogPage(context.Background(), open, b2, 1, 2, 1000); err == nil {
		t.Error("readLogPage of a log that cannot be opened: no error")
	}
	boom := errors.New("boom")
	calls := 0
	got, err := allPages(1, func(uint64) ([]eventlog.Entry, bool, error) {
		calls++
		return entries(1, 1), true, boom
	})
	if !errors.Is(err, boom) || calls != 1 || len(got) != 1 {
		t.Errorf("allPages after an error: %d calls, %d entries, err %v; want 1, 1, boom", calls, len(got), err)
	}
}
