package eventlog

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/warren-dev/warren/eventlog/record"
	"github.com/warren-dev/warren/faultfs"
)

const memPath = "home/agents/a1/events.jsonl"

// memLog returns a Mem holding a closed log of n entries and its bytes.
func memLog(t testing.TB, n int) (*faultfs.Mem, []byte) {
	t.Helper()
	m := faultfs.NewMem()
	return m, makeLog(t, m, memPath, n)
}

// A torn write of the last line leaves a prefix of it, perhaps followed by
// zeros or garbage. Without a pending file only a fragment with no newline
// may be cut (its bytes kept aside); complete damaged lines are corruption.
// With the pending file of the torn group, whatever the region holds is cut
// (and kept) and the group replayed.
func TestTornLastLineAtEveryOffset(t *testing.T) {
	_, full := memLog(t, 3)
	ends := lineEnds(full)
	line3 := full[ends[1]:ends[2]]
	pend := record.AppendTrailer(append([]byte(nil), line3...), 1)
	garbage := []byte("\xde\xad\n\xbe\xef{\"seq\":9}\n\x00junk")
	for cut := ends[1]; cut < ends[2]; cut++ {
		room := ends[2] - cut // a torn write never extends past the write
		tails := map[string][]byte{
			"cut":     full[:cut],
			"zeros":   append(append([]byte{}, full[:cut]...), make([]byte, room)...),
			"garbage": append(append([]byte{}, full[:cut]...), garbage[:min(len(garbage), room)]...),
		}
		if cut < ends[2]-1 {
			tails["newline"] = append(append([]byte{}, full[:cut]...), '\n')
		}
		for name, b := range tails {
			for _, withPending := range []bool{false, true} {
				what := fmt.Sprintf("cut %d %s pending=%v", cut, name, withPending)
				m := emptyMem(t)
				writeBytes(t, m, memPath, b)
				if withPending {
					writeBytes(t, m, PendingPath(memPath), pend)
				}
				hasNewline := bytes.IndexByte(b[ends[1]:], '\n') >= 0
				l, err := Open(m, memPath, Options{})
				switch {
				case !withPending && hasNewline:
					if !errors.Is(err, ErrCorrupt) {
						t.Fatalf("%s: Open = %v, want ErrCorrupt (complete lines no pending file covers)", what, err)
					}
					if got := readBytes(t, m, memPath); !bytes.Equal(got, b) {
						t.Fatalf("%s: Open changed a corrupt log", what)
					}
					continue
				case err != nil:
					t.Fatalf("%s: Open: %v", what, err)
				}
				l.Close()
				want := full[:ends[1]]
				wholeEntry := cut == ends[2]-1 // the entry lacks only its newline
				if withPending || wholeEntry {
					want = full // replayed, or kept with its newline restored
				}
				if got := readBytes(t, m, memPath); !bytes.Equal(got, want) {
					t.Fatalf("%s: log after recovery:\n%q\nwant\n%q", what, got, want)
				}
				if cutBytes := b[ends[1]:]; wholeEntry {
					// Nothing cut: nothing kept aside.
					if asides := tornCopies(t, m); len(asides) != 0 {
						t.Fatalf("%s: a kept whole entry left copies %v", what, asides)
					}
				} else if len(cutBytes) > 0 {
					asides := tornCopies(t, m)
					if len(asides) != 1 || !bytes.Equal(readBytes(t, m, asides[0]), cutBytes) {
						t.Fatalf("%s: cut bytes %q not kept aside (copies %v)", what, cutBytes, asides)
					}
				}
			}
		}
	}
}

// tornCopies lists the .torn- copies next to memPath.
func tornCopies(t *testing.T, m faultfs.FS) []string {
	t.Helper()
	ents, err := m.ReadDir("home/agents/a1")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "events.jsonl.torn-") {
			out = append(out, "home/agents/a1/"+e.Name())
		}
	}
	return out
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
	p, _ := record.Prepare(Record{Event: "x"}, MaxLineBytes)
	cases := map[string][]byte{
		"seq gap":       record.AppendLine(nil, 4, fixedTS, &p),
		"seq repeat":    record.AppendLine(nil, 2, fixedTS, &p),
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
	p, _ := record.Prepare(Record{Event: "x"}, MaxLineBytes)
	writeBytes(t, m, memPath, record.AppendLine(nil, 2, fixedTS, &p))
	var ce *CorruptError
	if _, err := Open(m, memPath, Options{}); !errors.As(err, &ce) || ce.Line != 1 || ce.Seq != 1 {
		t.Fatalf("got %v", err)
	}
}

// Garbage logs never panic Open: a fragment without a newline is cut (and
// kept aside), complete lines failing their CRC are corruption, left as
// they are.
func TestGarbageLogsNeverPanic(t *testing.T) {
	_, full := memLog(t, 2)
	files := map[string]struct {
		b       []byte
		corrupt bool
		want    uint64
	}{
		"only garbage":    {b: []byte("\xff\xfe\x00garbage without newline")},
		"garbage lines":   {b: []byte("garbage\nmore garbage\n\x00\x00\n"), corrupt: true},
		"only zeros":      {b: make([]byte, 4096)},
		"truncated line":  {b: full[:len(full)/2+5], want: 1},
		"invalid UTF-8":   {b: []byte("\xc3\x28\xa0\xa1\n"), corrupt: true},
		"just a newline":  {b: []byte("\n"), corrupt: true},
		"huge no newline": {b: bytes.Repeat([]byte{'{'}, 1<<20)},
	}
	for name, c := range files {
		m := emptyMem(t)
		writeBytes(t, m, memPath, c.b)
		l, err := Open(m, memPath, Options{})
		if c.corrupt {
			if !errors.Is(err, ErrCorrupt) || !bytes.Equal(readBytes(t, m, memPath), c.b) {
				t.Fatalf("%s: Open = %v, want ErrCorrupt and the file unchanged", name, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if l.LastSeq() != c.want {
			t.Fatalf("%s: LastSeq %d", name, l.LastSeq())
		}
		if e := mustAppend(t, l, "after", nil); e.Seq != c.want+1 {
			t.Fatalf("%s: next seq %d", name, e.Seq)
		}
		l.Close()
		if es, err := ReadAll(m, memPath); err != nil || len(es) != int(c.want+1) {
			t.Fatalf("%s: ReadAll %d entries, %v", name, len(es), err)
		}
		if len(tornCopies(t, m)) != 1 {
			t.Fatalf("%s: the cut bytes were not kept aside", name)
		}
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
