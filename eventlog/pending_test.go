package eventlog

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/warren-dev/warren/eventlog/record"
	"github.com/warren-dev/warren/faultfs"
)

// pendingLines formats entries with the given seqs as log lines.
func pendingLines(seqs ...uint64) []byte {
	var b []byte
	for _, s := range seqs {
		p, _ := record.Prepare(Record{Event: "pending", Data: map[string]uint64{"s": s}}, MaxLineBytes)
		b = record.AppendLine(b, s, fixedTS, &p)
	}
	return b
}

// pendingGroup formats a complete pending file: the lines and the trailer.
func pendingGroup(seqs ...uint64) []byte {
	return record.AppendTrailer(pendingLines(seqs...), len(seqs))
}

func TestPendingFileReplay(t *testing.T) {
	cases := []struct {
		name    string
		pending []byte
		want    uint64 // LastSeq after Open; the log starts with 3 entries
		pendSeq []uint64
	}{
		{"stale, already in log", pendingGroup(2, 3), 3, nil},
		{"empty", nil, 3, nil},
		{"garbage", []byte("\x00\xffgarbage\n{\"seq\":4"), 3, nil},
		{"zeros", make([]byte, 512), 3, nil},
		{"continues the log", pendingGroup(3, 4, 5), 5, []uint64{4, 5}},
		{"lines without trailer", pendingLines(4, 5), 3, nil},
		{"torn trailer", pendingGroup(4, 5)[:len(pendingLines(4, 5))+12], 3, nil},
		{"trailer with wrong count", record.AppendTrailer(pendingLines(4, 5), 1), 3, nil},
		{"trailer crc mismatch", append(pendingLines(4), bytes.Replace(pendingGroup(4, 5)[len(pendingLines(4, 5)):], []byte(`:2`), []byte(`:1`), 1)...), 3, nil},
		{"leftover bytes after the trailer", append(pendingGroup(4), pendingLines(5)...), 4, []uint64{4}},
		{"leftover group after the trailer", append(pendingGroup(4), pendingGroup(5, 6)...), 4, []uint64{4}},
		{"valid then torn", append(pendingLines(4, 5), pendingLines(6)[:30]...), 3, nil},
		{"valid then garbage", append(pendingLines(4), []byte("garbage\n")...), 3, nil},
		{"invalid UTF-8", []byte("\xc3\x28\xa0\xa1\n"), 3, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, full := memLog(t, 3)
			writeBytes(t, m, PendingPath(memPath), tc.pending)
			l, err := Open(m, memPath, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if l.LastSeq() != tc.want {
				t.Fatalf("LastSeq %d, want %d", l.LastSeq(), tc.want)
			}
			l.Close()
			if ok, _ := faultfs.Exists(m, PendingPath(memPath)); ok {
				t.Fatal("pending file not removed")
			}
			got := readBytes(t, m, memPath)
			if !bytes.HasPrefix(got, full) {
				t.Fatal("replay changed existing entries")
			}
			if want := pendingLines(tc.pendSeq...); !bytes.Equal(got[len(full):], want) {
				t.Fatalf("appended %q, want %q", got[len(full):], want)
			}
			// Opening again changes nothing.
			l = mustOpen(t, m, memPath)
			l.Close()
			if again := readBytes(t, m, memPath); !bytes.Equal(again, got) {
				t.Fatal("second Open changed the log")
			}
		})
	}
}

func TestPendingFileWithGapIsCorruption(t *testing.T) {
	m, _ := memLog(t, 3)
	writeBytes(t, m, PendingPath(memPath), pendingGroup(5, 6))
	_, err := Open(m, memPath, Options{})
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Path != PendingPath(memPath) || ce.Seq != 4 || ce.Line != 1 {
		t.Fatalf("got %v, want ErrCorrupt for the pending file", err)
	}
	if ok, _ := faultfs.Exists(m, PendingPath(memPath)); !ok {
		t.Fatal("a pending file that cannot be replayed was deleted")
	}
	rep, err := Repair(m, memPath)
	if err != nil || rep.PendingBackup == "" || rep.Backup != "" {
		t.Fatalf("Repair: %+v %v", rep, err)
	}
	if moved := readBytes(t, m, rep.PendingBackup); !bytes.Equal(moved, pendingGroup(5, 6)) {
		t.Fatal("pending copy differs")
	}
	l := mustOpen(t, m, memPath)
	defer l.Close()
	if l.LastSeq() != 3 {
		t.Fatalf("LastSeq %d", l.LastSeq())
	}
}

func TestAppendOpOrder(t *testing.T) {
	m, _ := memLog(t, 0)
	l := mustOpen(t, m, memPath)
	defer l.Close()
	pend := PendingPath(memPath)
	steps := []struct {
		name string
		do   func()
		want []string
	}{
		// The pending file's directory entry is durable before the first
		// log write: a torn log write must find it (see tail.go).
		{"first append creates the pending file and makes its entry durable", func() { mustAppend(t, l, "one", nil) },
			[]string{"create " + pend, "write " + pend, "sync " + pend, "syncdir home/agents/a1", "write " + memPath, "sync " + memPath}},
		{"a batch reuses it in place", func() { mustBatch(t, l, 2) },
			[]string{"write " + pend, "sync " + pend, "write " + memPath, "sync " + memPath}},
		{"a single append reuses it in place", func() { mustAppend(t, l, "two", nil) },
			[]string{"write " + pend, "sync " + pend, "write " + memPath, "sync " + memPath}},
		{"idle removal", func() { retireNow(l) }, []string{"remove " + pend}},
		{"a batch after idle creates it again", func() { mustBatch(t, l, 2) },
			[]string{"create " + pend, "write " + pend, "sync " + pend, "syncdir home/agents/a1", "write " + memPath, "sync " + memPath}},
		{"close removes it", func() { l.Close() }, []string{"remove " + pend}},
	}
	for _, s := range steps {
		start := len(m.Ops())
		s.do()
		if got := opStrings(m.Ops()[start:]); fmt.Sprint(got) != fmt.Sprint(s.want) {
			t.Fatalf("%s:\n got %v\nwant %v", s.name, got, s.want)
		}
	}
}

func mustBatch(t *testing.T, l *Log, n int) {
	t.Helper()
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{Event: "batch", Data: map[string]int{"i": i}}
	}
	if _, err := l.AppendBatch(recs); err != nil {
		t.Fatal(err)
	}
}

func opStrings(ops []faultfs.Op) []string {
	var s []string
	for _, o := range ops {
		s = append(s, o.String())
	}
	return s
}

func TestOpenNewLogSyncsCreatedDirectories(t *testing.T) {
	m := faultfs.NewMem()
	l := mustOpen(t, m, memPath)
	mustAppend(t, l, "agent.created", nil)
	// Power loss keeping only what was synced: the directories and the log
	// must all be there.
	m.Crash()
	m.Reboot(faultfs.RebootOptions{Mode: faultfs.PowerLoss})
	es, err := ReadAll(m, memPath)
	if err != nil || len(es) != 1 {
		t.Fatalf("after power loss: %d entries, %v", len(es), err)
	}
	ops := strings.Join(opStrings(m.Ops()), "\n")
	for _, d := range []string{"syncdir home/agents/a1", "syncdir home/agents", "syncdir home", "syncdir ."} {
		if !strings.Contains(ops, d) {
			t.Errorf("missing %q in ops:\n%s", d, ops)
		}
	}
}

func TestAncestorSyncFailures(t *testing.T) {
	// A directory this Open creates must be made durable.
	m := faultfs.NewMem()
	m.Inject(faultfs.Rule{Kind: faultfs.OpSyncDir, Path: "home", Sticky: true})
	if _, err := Open(m, memPath, Options{}); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Open with a failing fsync of a directory it created: %v", err)
	}
	// An ancestor that existed before (here the root) is best effort.
	m = faultfs.NewMem()
	if err := m.MkdirAll("home", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := m.SyncDir("."); err != nil {
		t.Fatal(err)
	}
	m.Inject(faultfs.Rule{Kind: faultfs.OpSyncDir, Path: ".", Sticky: true})
	l, err := Open(m, memPath, Options{})
	if err != nil {
		t.Fatalf("Open with a failing fsync of an old ancestor: %v", err)
	}
	l.Close()
}

// TestNewLogSyncsOnlyWhatItAdds (issue 38): a new log beside existing
// ones fsyncs its own directory and the directory that holds it, not
// every ancestor up to the root (the home was made durable once).
func TestNewLogSyncsOnlyWhatItAdds(t *testing.T) {
	m := faultfs.NewMem()
	mustAppend(t, mustOpen(t, m, memPath), "agent.created", nil)
	before := len(m.Ops())
	second := "home/agents/a2/events.jsonl"
	mustAppend(t, mustOpen(t, m, second), "agent.created", nil)
	var syncs []string
	for _, op := range opStrings(m.Ops()[before:]) {
		if strings.HasPrefix(op, "syncdir ") {
			syncs = append(syncs, op)
		}
	}
	for _, op := range syncs {
		if op != "syncdir home/agents/a2" && op != "syncdir home/agents" {
			t.Fatalf("the second log synced %v, want its directory and agents/ only", syncs)
		}
	}
	if len(syncs) < 2 {
		t.Fatalf("the second log synced %v, want its directory and agents/", syncs)
	}
	m.Crash()
	m.Reboot(faultfs.RebootOptions{Mode: faultfs.PowerLoss})
	if es, err := ReadAll(m, second); err != nil || len(es) != 1 {
		t.Fatalf("after power loss the second log has %d entries, %v", len(es), err)
	}
}
