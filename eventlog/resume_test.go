package eventlog

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/warren-dev/warren/eventlog/record"
	"github.com/warren-dev/warren/faultfs"
)

// resumeAt describes line seq (1-based) of data as a resume point.
func resumeAt(t testing.TB, fsys faultfs.FS, path string, data []byte, seq int) Resume {
	t.Helper()
	off := int64(0)
	if seq > 1 {
		off = int64(lineEnds(data)[seq-2])
	}
	r, err := ResumeAt(fsys, path, uint64(seq), off)
	if err != nil {
		t.Fatalf("ResumeAt(seq %d, offset %d): %v", seq, off, err)
	}
	return r
}

// openCollect opens the log and returns what Replay saw.
func openCollect(fsys faultfs.FS, path string, r *Resume) (*Log, []Entry, error) {
	var seen []Entry
	l, err := Open(fsys, path, Options{PendingIdle: -1, Resume: r, Replay: func(e Entry) error {
		seen = append(seen, e)
		return nil
	}})
	return l, seen, err
}

func TestOpenResumeFoldsOnlyTheLinesAfterIt(t *testing.T) {
	fsys, path := faultfs.NewMem(), memPath
	data := makeLog(t, fsys, path, 10)
	r := resumeAt(t, fsys, path, data, 7)
	l, seen, err := openCollect(fsys, path, &r)
	if err != nil {
		t.Fatalf("Open with Resume: %v", err)
	}
	defer l.Close()
	if len(seen) != 3 || seen[0].Seq != 8 || seen[2].Seq != 10 || l.LastSeq() != 10 {
		t.Fatalf("replayed %d entries from seq %v, last seq %d; want seqs 8..10", len(seen), seen, l.LastSeq())
	}
	if seen[0].Off != int64(lineEnds(data)[6]) {
		t.Fatalf("entry 8 at offset %d, want %d", seen[0].Off, lineEnds(data)[6])
	}
	e := mustAppend(t, l, "test.event", map[string]any{"i": 11})
	if e.Seq != 11 || e.Off != int64(len(data)) {
		t.Fatalf("append after a resumed Open: seq %d offset %d, want 11 at %d", e.Seq, e.Off, len(data))
	}
}

func TestOpenResumeMismatchChangesNothing(t *testing.T) {
	fsys, path := faultfs.NewMem(), memPath
	data := makeLog(t, fsys, path, 5)
	// A torn tail and a pending file that Open would act on.
	torn := append(append([]byte(nil), data...), `{"seq":6,"ts":"2026`...)
	writeBytes(t, fsys, path, torn)
	writeBytes(t, fsys, PendingPath(path), []byte("left over"))
	good := resumeAt(t, fsys, path, data, 3)
	ends := lineEnds(data)
	cases := map[string]Resume{
		"wrong seq":          {Seq: 4, Off: good.Off, CRC: good.CRC},
		"wrong crc":          {Seq: 3, Off: good.Off, CRC: good.CRC ^ 1},
		"offset inside line": {Seq: 3, Off: good.Off + 1, CRC: good.CRC},
		"offset past end":    {Seq: 9, Off: int64(len(torn)) + 100, CRC: good.CRC},
		"offset at the tail": {Seq: 6, Off: int64(ends[4]), CRC: good.CRC},
		"negative offset":    {Seq: 3, Off: -1, CRC: good.CRC},
		"wrong length":       {Seq: 3, Off: good.Off, CRC: good.CRC, Len: good.Len + 1},
	}
	for name, r := range cases {
		t.Run(name, func(t *testing.T) {
			ops := fsys.MutatingOps()
			_, _, err := openCollect(fsys, path, &r)
			if !errors.Is(err, ErrResumeMismatch) {
				t.Fatalf("Open with a resume point that does not match: %v, want ErrResumeMismatch", err)
			}
			if got := readBytes(t, fsys, path); !bytes.Equal(got, torn) {
				t.Fatalf("the log changed")
			}
			if got := readBytes(t, fsys, PendingPath(path)); string(got) != "left over" {
				t.Fatalf("the pending file changed")
			}
			if n := fsys.MutatingOps() - ops; n != 0 {
				t.Fatalf("%d mutating ops on a mismatch, want none", n)
			}
		})
	}
	t.Run("missing log", func(t *testing.T) {
		other := "home/agents/a2/events.jsonl"
		_, _, err := openCollect(fsys, other, &good)
		if !errors.Is(err, ErrResumeMismatch) {
			t.Fatalf("Open of a missing log with a resume point: %v, want ErrResumeMismatch", err)
		}
		if _, err := fsys.Stat(other); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("the missing log was created: %v", err)
		}
	})
}

func TestOpenResumeAppliesTheTailRules(t *testing.T) {
	fsys, path := faultfs.NewMem(), memPath
	data := makeLog(t, fsys, path, 6)
	r := resumeAt(t, fsys, path, data, 4)
	t.Run("torn tail cut", func(t *testing.T) {
		writeBytes(t, fsys, path, append(append([]byte(nil), data...), "garbage without newline"...))
		l, seen, err := openCollect(fsys, path, &r)
		if err != nil {
			t.Fatal(err)
		}
		l.Close()
		if len(seen) != 2 || !bytes.Equal(readBytes(t, fsys, path), data) {
			t.Fatalf("replayed %d entries, log %d bytes; want 2 entries and the torn tail cut to %d bytes", len(seen), len(readBytes(t, fsys, path)), len(data))
		}
	})
	t.Run("damage after the resume point is corruption", func(t *testing.T) {
		bad := append([]byte(nil), data...)
		ends := lineEnds(bad)
		bad[ends[4]+20] ^= 0x01 // line 6
		writeBytes(t, fsys, path, append(append([]byte(nil), data[:ends[4]]...), append(bad[ends[4]:ends[5]], lineWithSeq(t, 7)...)...))
		_, _, err := openCollect(fsys, path, &r)
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("a damaged line followed by a good one after the resume point: %v, want ErrCorrupt", err)
		}
	})
}

// lineWithSeq is a valid line carrying seq.
func lineWithSeq(t testing.TB, seq uint64) []byte {
	p, err := record.Prepare(Record{Event: "test.event", Data: map[string]any{"seq": seq}}, MaxLineBytes)
	if err != nil {
		t.Fatal(err)
	}
	return record.AppendLine(nil, seq, fixedTS, &p)
}

// TestVerifyFindsEveryDamageBeforeTheResumePoint flips one bit in every
// byte before the resume line (and in it): Verify reports ErrCorrupt, and
// a log opened with that resume point refuses appends.
func TestVerifyFindsEveryDamageBeforeTheResumePoint(t *testing.T) {
	fsys, path := faultfs.NewMem(), memPath
	data := makeLog(t, fsys, path, 4)
	r := resumeAt(t, fsys, path, data, 3)
	if err := Verify(fsys, path, r); err != nil {
		t.Fatalf("Verify of a good log: %v", err)
	}
	end := lineEnds(data)[2]
	for i := 0; i < end; i++ {
		bad := append([]byte(nil), data...)
		bad[i] ^= 0x04
		writeBytes(t, fsys, path, bad)
		if err := Verify(fsys, path, r); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("bit flip at byte %d: Verify = %v, want ErrCorrupt", i, err)
		}
		if i >= int(r.Off) {
			continue // the resume line itself: Open refuses the resume point
		}
		l, err := Open(fsys, path, Options{PendingIdle: -1, Resume: &r})
		if err != nil {
			t.Fatalf("bit flip at byte %d: Open with the resume point: %v", i, err)
		}
		if _, err := l.Append("test.event", nil); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("bit flip at byte %d: append on top of a damaged prefix = %v, want ErrCorrupt", i, err)
		}
		l.Close()
		if got := readBytes(t, fsys, path); !bytes.Equal(got, bad) {
			t.Fatalf("bit flip at byte %d: the refused append changed the log", i)
		}
	}
}

// cloneLogFiles copies the log and pending file of m into a new Mem.
func cloneLogFiles(t testing.TB, m *faultfs.Mem) *faultfs.Mem {
	t.Helper()
	out := faultfs.NewMem()
	if err := out.MkdirAll("home/agents/a1", 0o700); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{memPath, PendingPath(memPath)} {
		if ok, err := faultfs.Exists(m, p); err != nil || !ok {
			continue
		}
		durableWrite(t, out, p, readBytes(t, m, p))
	}
	return out
}

// resumeWorkloads have durable entries before their run, so a resume point
// exists whatever the crash does.
var resumeWorkloads = []workload{
	workloads[len(workloads)-1], // recovery: torn tail and pending file
	{
		name: "appends after durable entries",
		setup: func(t testing.TB, m *faultfs.Mem, mod *model) {
			l := mustOpen(t, m, memPath)
			for i := 0; i < 3; i++ {
				if err := mod.append(t, l); err != nil {
					t.Fatal(err)
				}
			}
			l.Close()
		},
		run: openAnd(func(l *Log, mod *model) error {
			if err := mod.append(nil, l); err != nil {
				return err
			}
			return mod.batch(l, 3)
		}),
	},
}

// TestResumedOpenAfterCrashEqualsFullOpen crashes a workload at every op
// and reboots, then opens the log twice from the same state, once from the
// start and once resuming at seq 2: both must leave the same bytes and
// pending file, and the resumed Replay must see exactly the entries after
// seq 2. Then it crashes the resumed Open at every op, and a full Open
// must still recover with the log invariants.
func TestResumedOpenAfterCrashEqualsFullOpen(t *testing.T) {
	for _, w := range resumeWorkloads {
		total := countOps(t, w)
		for k := 1; k <= total+1; k++ {
			for _, rb := range allReboots {
				name := fmt.Sprintf("%s/k=%d/%s", w.name, k, rb.name)
				m2, mod2 := runCrash(t, w, k, rb, uint64(k))
				m1 := cloneLogFiles(t, m2)
				data := readBytes(t, m2, memPath)
				r := resumeAt(t, m2, memPath, data, 2)
				l1, seen1, err1 := openCollect(m1, memPath, nil)
				l2, seen2, err2 := openCollect(m2, memPath, &r)
				if (err1 == nil) != (err2 == nil) {
					t.Fatalf("%s: full Open: %v; resumed Open: %v", name, err1, err2)
				}
				if err1 == nil {
					l1.Close()
					l2.Close()
				}
				b1, _ := faultfs.ReadFile(m1, memPath)
				b2, _ := faultfs.ReadFile(m2, memPath)
				p1, e1 := faultfs.Exists(m1, PendingPath(memPath))
				p2, e2 := faultfs.Exists(m2, PendingPath(memPath))
				if !bytes.Equal(b1, b2) || p1 != p2 || e1 != nil || e2 != nil {
					t.Fatalf("%s: full and resumed Open left different files (%d/%d bytes, pending %v/%v)", name, len(b1), len(b2), p1, p2)
				}
				var tail []Entry
				for _, e := range seen1 {
					if e.Seq > 2 {
						tail = append(tail, e)
					}
				}
				if fmt.Sprint(tail) != fmt.Sprint(seen2) {
					t.Fatalf("%s: resumed Replay saw %v, want %v", name, seen2, tail)
				}
				mod2.check(t, m2)
			}
		}
	}
	// A crash at every op of a resumed Open.
	for _, w := range resumeWorkloads {
		total := countOps(t, w)
		for k := 1; k <= total+1; k++ {
			rb := allReboots[3]
			m, mod := runCrash(t, w, k, rb, uint64(k))
			r := resumeAt(t, m, memPath, readBytes(t, m, memPath), 2)
			before := m.MutatingOps()
			if l, err := Open(m, memPath, Options{Resume: &r}); err == nil {
				l.Close()
			}
			recOps := m.MutatingOps() - before
			for j := 1; j <= recOps; j++ {
				m, mod := runCrash(t, w, k, rb, uint64(k))
				m.CrashAt(j)
				if l, err := Open(m, memPath, Options{Resume: &r}); err == nil {
					l.Close()
				}
				m.Crash()
				m.Reboot(allReboots[2].opts(uint64(j)))
				t.Run(fmt.Sprintf("%s/k=%d/resumed-open-crash-j=%d", w.name, k, j), func(t *testing.T) { mod.check(t, m) })
			}
			_ = mod
		}
	}
}

// TestOpenFsyncsOnlyWhatMayBeUnsynced: with no pending file and nothing
// cut, every line of a log was made durable by some fsync, so Open fsyncs
// nothing, resumed at the last line, before it, or from the start; with a
// pending file, or a torn fragment to cut, it fsyncs the log.
func TestOpenFsyncsOnlyWhatMayBeUnsynced(t *testing.T) {
	syncs := func(m *faultfs.Mem, from int) int {
		n := 0
		for _, op := range m.Ops()[from:] {
			if op.Kind == faultfs.OpSync && op.Path == memPath {
				n++
			}
		}
		return n
	}
	m := faultfs.NewMem()
	data := makeLog(t, m, memPath, 3)
	last := resumeAt(t, m, memPath, data, 3)
	mid := resumeAt(t, m, memPath, data, 2)
	for _, c := range []struct {
		name     string
		r        *Resume
		pending  bool
		fragment bool
		want     int
	}{
		{"at the last line", &last, false, false, 0},
		{"before the last line", &mid, false, false, 0},
		{"from the start", nil, false, false, 0},
		{"at the last line with a pending file", &last, true, false, 1},
		{"from the start with a pending file", nil, true, false, 1},
		{"before a torn fragment", &last, false, true, 1},
	} {
		if c.pending {
			writeBytes(t, m, PendingPath(memPath), []byte("incomplete"))
		}
		if c.fragment {
			writeBytes(t, m, memPath, append(append([]byte(nil), data...), `{"seq":4,"ts":"20`...))
		}
		from := len(m.Ops())
		l, err := Open(m, memPath, Options{PendingIdle: -1, Resume: c.r})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		l.Close()
		if got := syncs(m, from); got != c.want {
			t.Errorf("%s: %d fsyncs of the log, want %d", c.name, got, c.want)
		}
	}
}
