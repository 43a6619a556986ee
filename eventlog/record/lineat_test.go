package record

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

// The helpers that read one line by position find the line they are told
// of and refuse anything else.
func TestLinesByPosition(t *testing.T) {
	full := logLines(t, 3)
	ends := lineEnds(full)
	r := bytes.NewReader(full)
	line2 := full[ends[0] : ends[1]-1]

	if e, ok := EntryAt(r, int64(ends[0]), 2); !ok || e.Seq != 2 || e.Off != int64(ends[0]) {
		t.Fatalf("EntryAt(seq 2): %+v %v", e, ok)
	}
	for _, c := range []struct {
		off int64
		seq uint64
	}{{0, 1}, {int64(ends[0]), 3}, {int64(ends[0]) + 1, 2}, {int64(ends[2]), 4}} {
		if e, ok := EntryAt(r, c.off, c.seq); ok {
			t.Errorf("EntryAt(%d, %d) = %+v, want none", c.off, c.seq, e)
		}
	}

	crc := LineCRC(line2)
	if end, err := CheckLineAt(r, int64(ends[0]), 2, crc); err != nil || end != int64(ends[1]) {
		t.Fatalf("CheckLineAt: %d, %v", end, err)
	}
	if _, err := CheckLineAt(r, int64(ends[0]), 3, crc); err == nil || !strings.Contains(err.Error(), "seq 2") {
		t.Errorf("CheckLineAt with the wrong seq: %v", err)
	}
	if _, err := CheckLineAt(r, int64(ends[0]), 2, crc+1); err == nil || !strings.Contains(err.Error(), "crc") {
		t.Errorf("CheckLineAt with the wrong crc: %v", err)
	}
	if _, err := CheckLineAt(r, int64(ends[2])-3, 3, crc); err == nil {
		t.Error("CheckLineAt accepted a fragment")
	}

	if err := CheckLast(r, int64(ends[1]), 2); err != nil {
		t.Fatalf("CheckLast(seq 2): %v", err)
	}
	if err := CheckLast(r, int64(ends[1]), 3); err == nil {
		t.Error("CheckLast accepted the wrong seq")
	}
	if err := CheckLast(r, int64(ends[1])-1, 2); err == nil {
		t.Error("CheckLast accepted a size that is not at a line end")
	}

	if err := CheckPrefix(r, "l", int64(ends[1]), 2); err != nil {
		t.Fatalf("CheckPrefix: %v", err)
	}
	bad := append([]byte(nil), full...)
	bad[3] ^= 0x20
	var ce *CorruptError
	if err := CheckPrefix(bytes.NewReader(bad), "l", int64(ends[1]), 2); !errors.As(err, &ce) || ce.Line != 1 {
		t.Errorf("CheckPrefix over a damaged first line: %v", err)
	}

	last := full[ends[1]:]
	if e, body, ok := WholeEntry(last[:len(last)-1], 3); !ok || e.Seq != 3 || len(body) != len(last)-1 {
		t.Errorf("WholeEntry without the newline: %v", ok)
	}
	flipped := append(append([]byte(nil), last[:len(last)-1]...), 'x')
	if e, body, ok := WholeEntry(flipped, 3); !ok || e.Seq != 3 || len(body) != len(last)-1 {
		t.Errorf("WholeEntry with a flipped newline: %v", ok)
	}
	if _, _, ok := WholeEntry(last[:len(last)-1], 4); ok {
		t.Error("WholeEntry accepted the wrong seq")
	}
	if _, _, ok := WholeEntry(last[:len(last)-3], 3); ok {
		t.Error("WholeEntry accepted a cut line")
	}
}

// A line longer than the first buffer of a read by position (a large
// message's payload) is read whole by LineAt and EntryAt.
func TestLinesByPositionLongerThanTheFirstBuffer(t *testing.T) {
	ts := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	var b []byte
	for i, pad := range []int{10, 3 * lineAtBufSize, 10} {
		p, err := Prepare(Record{Event: "test.event", Data: map[string]any{"pad": strings.Repeat("x", pad)}}, MaxLineBytes)
		if err != nil {
			t.Fatal(err)
		}
		b = AppendLine(b, uint64(i+1), ts, &p)
	}
	ends := lineEnds(b)
	if long := ends[1] - ends[0]; long <= 3*lineAtBufSize {
		t.Fatalf("the long line is %d bytes; the test needs one over %d", long, 3*lineAtBufSize)
	}
	r := bytes.NewReader(b)
	line, end, err := LineAt(r, int64(ends[0]))
	if err != nil || end != int64(ends[1]) || !bytes.Equal(line, b[ends[0]:ends[1]-1]) {
		t.Fatalf("LineAt over the long line: end %d (want %d), %v", end, ends[1], err)
	}
	e, ok := EntryAt(r, int64(ends[0]), 2)
	if !ok || e.Seq != 2 || e.Off != int64(ends[0]) || len(e.Data) < 3*lineAtBufSize {
		t.Fatalf("EntryAt over the long line: seq %d, off %d, %d data bytes, %v", e.Seq, e.Off, len(e.Data), ok)
	}
}

// CheckLineEnds reads a line's two ends only: it accepts the line it is
// told of, refuses anything whose ends differ, and (by design) cannot see
// a change between them.
func TestCheckLineEnds(t *testing.T) {
	full := logLines(t, 3)
	ends := lineEnds(full)
	off, n := int64(ends[0]), int64(ends[1]-ends[0])
	crc := LineCRC(full[off : off+n])
	r := bytes.NewReader(full)
	if end, err := CheckLineEnds(r, off, n, 2, crc); err != nil || end != int64(ends[1]) {
		t.Fatalf("CheckLineEnds of line 2: %d, %v", end, err)
	}
	inside := bytes.Clone(full)
	inside[off+n/2] ^= 0x01
	if _, err := CheckLineEnds(bytes.NewReader(inside), off, n, 2, crc); err != nil {
		t.Fatalf("CheckLineEnds looked inside the line: %v", err)
	}
	flip := func(at int64) []byte {
		b := bytes.Clone(full)
		b[at] ^= 0x01
		return b
	}
	for name, c := range map[string]struct {
		data   []byte
		off, n int64
		seq    uint64
		crc    uint32
		want   string
	}{
		"wrong seq":        {full, off, n, 3, crc, "seq 2"},
		"wrong crc":        {full, off, n, 2, crc ^ 1, "crc"},
		"too short":        {full, off, n - 1, 2, crc, "newline"},
		"too long":         {full, off, n + 1, 2, crc, "newline"},
		"inside a line":    {full, off + 1, n - 1, 2, crc, "start a line"},
		"past the end":     {full, int64(ends[2]), n, 4, crc, "read"},
		"tiny":             {full, off, 10, 2, crc, "no line of 10 bytes"},
		"negative offset":  {full, -1, n, 2, crc, "offset -1"},
		"seq digit":        {flip(off + 7), off, n, 2, crc, "seq"},
		"no newline":       {flip(off + n - 1), off, n, 2, crc, "newline"},
		"crc field letter": {flip(off + n - 4), off, n, 2, crc, "crc"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := CheckLineEnds(bytes.NewReader(c.data), c.off, c.n, c.seq, c.crc)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("CheckLineEnds: %v, want an error mentioning %q", err, c.want)
			}
		})
	}
}
