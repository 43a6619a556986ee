package eventlog

import (
	"errors"
	"strings"
	"testing"
)

// TestEntryOffsets: Append and the readers give each entry the byte offset
// of its line, also after a reopen.
func TestEntryOffsets(t *testing.T) {
	fsys, path := tempLog(t)
	l := mustOpen(t, fsys, path)
	var appended []Entry
	for i := 0; i < 5; i++ {
		appended = append(appended, mustAppend(t, l, "e", map[string]any{"i": i, "pad": strings.Repeat("p", i*10)}))
	}
	l.Close()
	l = mustOpen(t, fsys, path)
	appended = append(appended, mustAppend(t, l, "e", map[string]any{"i": 5}))
	l.Close()
	raw := readBytes(t, fsys, path)
	read, err := ReadAll(fsys, path)
	if err != nil {
		t.Fatal(err)
	}
	off := int64(0)
	for i, e := range read {
		if e.Off != off || appended[i].Off != off {
			t.Fatalf("entry %d: read at %d, appended at %d, line starts at %d", i, e.Off, appended[i].Off, off)
		}
		off += int64(strings.IndexByte(string(raw[off:]), '\n') + 1)
	}
}

// TestReadSeq: with a good hint one line is read; with a wrong or no hint
// the log is scanned; a missing seq is ErrNoSuchSeq.
func TestReadSeq(t *testing.T) {
	fsys, path := tempLog(t)
	l := mustOpen(t, fsys, path)
	var es []Entry
	for i := 0; i < 10; i++ {
		es = append(es, mustAppend(t, l, "e", map[string]any{"i": i}))
	}
	l.Close()
	for _, hint := range []int64{es[6].Off, 0, es[2].Off, es[6].Off + 3, 1 << 30} {
		e, err := ReadSeq(fsys, path, 7, hint)
		if err != nil || e.Seq != 7 || string(e.Data) != `{"i":6}` || e.Off != es[6].Off {
			t.Fatalf("ReadSeq(7, hint %d) = %+v, %v", hint, e, err)
		}
	}
	if _, err := ReadSeq(fsys, path, 11, 0); !errors.Is(err, ErrNoSuchSeq) {
		t.Fatalf("ReadSeq past the end: %v", err)
	}
}

// TestReadSeqs: several lines through one handle, each index once,
// whether its hint is right, stale or absent (line 1 at offset 0
// included); a seq the log lacks is ErrNoSuchSeq.
func TestReadSeqs(t *testing.T) {
	fsys, path := tempLog(t)
	l := mustOpen(t, fsys, path)
	var es []Entry
	for i := 0; i < 10; i++ {
		es = append(es, mustAppend(t, l, "e", map[string]any{"i": i}))
	}
	l.Close()
	at := []At{{Seq: 1}, {Seq: 7, Off: es[6].Off}, {Seq: 3, Off: es[6].Off}, {Seq: 9}, {Seq: 7, Off: 1 << 30}, {Seq: 10, Off: es[9].Off}}
	got := map[int]Entry{}
	err := ReadSeqs(fsys, path, at, func(i int, e Entry) error {
		if _, dup := got[i]; dup {
			t.Fatalf("index %d given twice", i)
		}
		got[i] = e
		return nil
	})
	if err != nil || len(got) != len(at) {
		t.Fatalf("ReadSeqs: %d of %d entries, %v", len(got), len(at), err)
	}
	for i, a := range at {
		if e := got[i]; e.Seq != a.Seq || e.Off != es[a.Seq-1].Off || string(e.Data) != string(es[a.Seq-1].Data) {
			t.Fatalf("index %d (seq %d): %+v", i, a.Seq, e)
		}
	}
	if err := ReadSeqs(fsys, path, []At{{Seq: 2, Off: es[1].Off}, {Seq: 12}}, func(int, Entry) error { return nil }); !errors.Is(err, ErrNoSuchSeq) {
		t.Fatalf("ReadSeqs past the end: %v", err)
	}
	stop := errors.New("stop")
	if err := ReadSeqs(fsys, path, at, func(int, Entry) error { return stop }); err != stop {
		t.Fatalf("an error of fn: %v", err)
	}
}

// TestNewReaderAt: starting at a remembered offset reads the same entries
// as from the start; a bad offset falls back to a full read.
func TestNewReaderAt(t *testing.T) {
	fsys, path := tempLog(t)
	l := mustOpen(t, fsys, path)
	var es []Entry
	for i := 0; i < 10; i++ {
		es = append(es, mustAppend(t, l, "e", map[string]any{"i": i}))
	}
	l.Close()
	for _, off := range []int64{es[4].Off, 0, es[4].Off + 1, es[7].Off} {
		r, err := NewReaderAt(fsys, path, 5, off)
		if err != nil {
			t.Fatal(err)
		}
		var seqs []uint64
		for {
			e, err := r.Next()
			if err != nil {
				break
			}
			seqs = append(seqs, e.Seq)
		}
		r.Close()
		if len(seqs) != 6 || seqs[0] != 5 || seqs[5] != 10 {
			t.Fatalf("NewReaderAt(5, off %d) read seqs %v, want 5..10", off, seqs)
		}
	}
}
