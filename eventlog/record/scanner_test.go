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
