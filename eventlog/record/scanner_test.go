package record

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

// logLines formats n entries with seqs 1..n as a log holds them.
func logLines(t testing.TB, n int) []byte {
	t.Helper()
	var b []byte
	for i := 1; i <= n; i++ {
		p, err := Prepare(Record{Event: "test.event", Data: map[string]any{"i": i, "pad": "xxxxxxxxxx"}}, MaxLineBytes)
		if err != nil {
			t.Fatal(err)
		}
		b = AppendLine(b, uint64(i), time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC), &p)
	}
	return b
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

func TestOverLongLineIsTornAtTailCorruptInMiddle(t *testing.T) {
	full := logLines(t, 2)
	long := append(bytes.Repeat([]byte("x"), 500), '\n')
	scan := func(b []byte) (*Scanner, error) {
		sc := NewScanner(bytes.NewReader(b), "events.jsonl", 300)
		return sc, sc.ScanToEnd()
	}
	sc, err := scan(append(append([]byte{}, full...), long...))
	if err != nil || sc.LastSeq() != 2 || sc.Torn().Bytes != int64(len(long)) || !strings.Contains(sc.Torn().Reason, "over the 300-byte limit") {
		t.Fatalf("long tail: %v %+v", err, sc)
	}
	ends := lineEnds(full)
	mid := append(append(append([]byte{}, full[:ends[0]]...), long...), full[ends[0]:]...)
	var ce *CorruptError
	if _, err := scan(mid); !errors.As(err, &ce) || ce.Line != 2 || !strings.Contains(ce.Reason, "limit") {
		t.Fatalf("long middle line: %v", err)
	}
	// A line over the limit without a newline is a torn tail too.
	if sc, err := scan(append(append([]byte{}, full...), long[:400]...)); err != nil || sc.Torn().Bytes != 400 {
		t.Fatalf("long fragment: %v %+v", err, sc)
	}
}

// TestScannerInALentBuffer: a scanner reading into a lent buffer, one
// smaller than a line or larger than the log, returns the lines a
// scanner with its own buffer does, and a torn tail alike.
func TestScannerInALentBuffer(t *testing.T) {
	log := append(logLines(t, 40), `{"seq":41,"ts":"2026-11-22T`...) // torn
	want := func() []Entry {
		var es []Entry
		sc := NewScanner(bytes.NewReader(log), "events.jsonl", MaxLineBytes)
		for e, err := sc.Next(); err == nil; e, err = sc.Next() {
			es = append(es, e)
		}
		return es
	}()
	if len(want) != 40 {
		t.Fatalf("the scanner of its own read %d lines, want 40", len(want))
	}
	for _, size := range []int{16, 100, 4 << 10, 1 << 20} {
		buf := make([]byte, size)
		sc := NewScannerIn(bytes.NewReader(log), "events.jsonl", MaxLineBytes, buf)
		var got []Entry
		for e, err := sc.Next(); err == nil; e, err = sc.Next() {
			got = append(got, e)
		}
		if len(got) != len(want) || sc.LastSeq() != 40 || sc.Torn().Bytes == 0 {
			t.Fatalf("buffer of %d: %d lines, last seq %d, torn %+v; want 40 lines and a torn tail", size, len(got), sc.LastSeq(), sc.Torn())
		}
		for i := range got {
			if got[i].Seq != want[i].Seq || !bytes.Equal(got[i].Data, want[i].Data) || got[i].Off != want[i].Off {
				t.Fatalf("buffer of %d, line %d: %+v, want %+v", size, i+1, got[i], want[i])
			}
		}
	}
}
