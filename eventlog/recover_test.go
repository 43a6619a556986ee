package eventlog

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/warren-dev/warren/faultfs"
)

const memPath = "home/agents/a1/events.jsonl"

// memLog returns a Mem holding a closed log of n entries and its bytes.
func memLog(t testing.TB, n int) (*faultfs.Mem, []byte) {
	t.Helper()
	m := faultfs.NewMem()
	return m, makeLog(t, m, memPath, n)
}

func TestTornLastLineAtEveryOffsetRecoversToLastValidLine(t *testing.T) {
	m, full := memLog(t, 3)
	ends := lineEnds(full)
	keep := full[:ends[1]]
	for cut := ends[1]; cut < ends[2]; cut++ {
		tails := map[string][]byte{
			"cut":     full[:cut],
			"zeros":   append(append([]byte{}, full[:cut]...), make([]byte, ends[2]-cut+7)...),
			"garbage": append(append([]byte{}, full[:cut]...), []byte("\xde\xad\n\xbe\xef{\"seq\":9}\n\x00junk")...),
		}
		if cut < ends[2]-1 {
			tails["newline"] = append(append([]byte{}, full[:cut]...), '\n')
		}
		for name, b := range tails {
			writeBytes(t, m, memPath, b)
			l, err := Open(m, memPath, Options{})
			if err != nil {
				t.Fatalf("cut %d %s: Open: %v", cut, name, err)
			}
			if l.LastSeq() != 2 {
				t.Fatalf("cut %d %s: LastSeq %d, want 2", cut, name, l.LastSeq())
			}
			l.Close()
			if got := readBytes(t, m, memPath); !bytes.Equal(got, keep) {
				t.Fatalf("cut %d %s: log not truncated to the last valid line:\n%q", cut, name, got)
			}
		}
	}
}

func TestFlippedBitInMiddleLineIsCorruption(t *testing.T) {
	m, full := memLog(t, 4)
	ends := lineEnds(full)
	for i := ends[0]; i < ends[1]; i++ {
		for _, bit := range []byte{0x01, 0x20, 0x80} {
			b := append([]byte{}, full...)
			b[i] ^= bit
			writeBytes(t, m, memPath, b)
			_, err := Open(m, memPath, Options{})
			var ce *CorruptError
			if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) {
				t.Fatalf("byte %d bit %#x: Open: %v, want ErrCorrupt", i, bit, err)
			}
			if ce.Line != 2 || ce.Seq != 2 || ce.Path != memPath || ce.Offset != int64(ends[0]) {
				t.Fatalf("byte %d bit %#x: %+v, want line 2 seq 2", i, bit, ce)
			}
			if !strings.Contains(err.Error(), "line 2") || !strings.Contains(err.Error(), "seq 2") {
				t.Fatalf("message does not name line and seq: %v", err)
			}
			if got := readBytes(t, m, memPath); !bytes.Equal(got, b) {
				t.Fatalf("Open changed a corrupt log")
			}
			if _, err := ReadAll(m, memPath); !errors.As(err, &ce) || ce.Line != 2 {
				t.Fatalf("ReadAll: %v", err)
			}
		}
	}
}

func TestZeroedMiddleBytesAreCorruption(t *testing.T) {
	m, full := memLog(t, 3)
	ends := lineEnds(full)
	b := append([]byte{}, full...)
	copy(b[ends[0]+10:], []byte{0, 0, 0, 0})
	writeBytes(t, m, memPath, b)
	if _, err := Open(m, memPath, Options{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("got %v", err)
	}
}

func TestCRCValidBadContentIsCorruptionEvenAtTail(t *testing.T) {
	m, full := memLog(t, 2)
	p, _ := prepare(Record{Event: "x"}, MaxLineBytes)
	cases := map[string][]byte{
		"seq gap":       appendLine(nil, 4, fixedTS, &p),
		"seq repeat":    appendLine(nil, 2, fixedTS, &p),
		"invalid UTF-8": crcLine(`{"seq":3,"ts":"2026-01-01T00:00:00.000Z","event":"bad\xff","data":{}`),
		"array data":    crcLine(`{"seq":3,"ts":"2026-01-01T00:00:00.000Z","event":"e","data":[1]`),
	}
	for name, line := range cases {
		writeBytes(t, m, memPath, append(append([]byte{}, full...), line...))
		_, err := Open(m, memPath, Options{})
		var ce *CorruptError
		if !errors.As(err, &ce) || ce.Line != 3 || ce.Seq != 3 {
			t.Fatalf("%s: got %v, want ErrCorrupt at line 3", name, err)
		}
	}
}

func TestFirstLineMustBeSeqOne(t *testing.T) {
	m, _ := memLog(t, 0)
	p, _ := prepare(Record{Event: "x"}, MaxLineBytes)
	writeBytes(t, m, memPath, appendLine(nil, 2, fixedTS, &p))
	var ce *CorruptError
	if _, err := Open(m, memPath, Options{}); !errors.As(err, &ce) || ce.Line != 1 || ce.Seq != 1 {
		t.Fatalf("got %v", err)
	}
}

func TestGarbageLogsAreRepairedNeverPanic(t *testing.T) {
	m, full := memLog(t, 2)
	files := map[string][]byte{
		"only garbage":    []byte("\xff\xfe\x00garbage without newline"),
		"garbage lines":   []byte("garbage\nmore garbage\n\x00\x00\n"),
		"only zeros":      make([]byte, 4096),
		"truncated line":  full[:len(full)/2],
		"invalid UTF-8":   []byte("\xc3\x28\xa0\xa1\n"),
		"just a newline":  []byte("\n"),
		"huge no newline": bytes.Repeat([]byte{'{'}, 1<<20),
	}
	for name, b := range files {
		writeBytes(t, m, memPath, b)
		l, err := Open(m, memPath, Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := uint64(0)
		if name == "truncated line" {
			want = 1
		}
		if l.LastSeq() != want {
			t.Fatalf("%s: LastSeq %d", name, l.LastSeq())
		}
		if e := mustAppend(t, l, "after", nil); e.Seq != want+1 {
			t.Fatalf("%s: next seq %d", name, e.Seq)
		}
		l.Close()
		if es, err := ReadAll(m, memPath); err != nil || len(es) != int(want+1) {
			t.Fatalf("%s: ReadAll %d entries, %v", name, len(es), err)
		}
	}
}

func TestOverLongLineIsTornAtTailCorruptInMiddle(t *testing.T) {
	m, full := memLog(t, 2)
	long := append(bytes.Repeat([]byte("x"), 500), '\n')
	scan := func(b []byte) (*logScanner, error) {
		writeBytes(t, m, memPath, b)
		f, err := m.OpenFile(memPath, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		sc := newLogScanner(f, memPath, 300)
		return sc, sc.scanToEnd()
	}
	sc, err := scan(append(append([]byte{}, full...), long...))
	if err != nil || sc.lastSeq != 2 || sc.tornBytes != int64(len(long)) || !strings.Contains(sc.tornReason, "over the 300-byte limit") {
		t.Fatalf("long tail: %v %+v", err, sc)
	}
	ends := lineEnds(full)
	mid := append(append(append([]byte{}, full[:ends[0]]...), long...), full[ends[0]:]...)
	var ce *CorruptError
	if _, err := scan(mid); !errors.As(err, &ce) || ce.Line != 2 || !strings.Contains(ce.Reason, "limit") {
		t.Fatalf("long middle line: %v", err)
	}
	// A line over the limit without a newline is a torn tail too.
	if sc, err := scan(append(append([]byte{}, full...), long[:400]...)); err != nil || sc.tornBytes != 400 {
		t.Fatalf("long fragment: %v %+v", err, sc)
	}
}

func TestAppendAfterRepairedTornTailSurvivesCrash(t *testing.T) {
	m, full := memLog(t, 3)
	writeBytes(t, m, memPath, append(append([]byte{}, full...), []byte(`{"seq":4,"ts":"2026`)...))
	l := mustOpen(t, m, memPath)
	for i := 0; i < 5; i++ {
		mustAppend(t, l, "after", map[string]int{"i": i})
	}
	m.Crash()
	m.Reboot(faultfs.RebootOptions{Mode: faultfs.PowerLoss, Tail: faultfs.TailNone})
	l = mustOpen(t, m, memPath)
	defer l.Close()
	if l.LastSeq() != 8 {
		t.Fatalf("LastSeq %d after crash, want 8", l.LastSeq())
	}
}
