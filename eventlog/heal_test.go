package eventlog

import (
	"bytes"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/warren-dev/warren/faultfs"
)

// ids reads the log's entry ids in order (a gap-free seq prefix).
func ids(t *testing.T, fsys faultfs.FS, path string) []int {
	t.Helper()
	got, err := recovered(fsys, path)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func ackedIDs(m *model) []int {
	var out []int
	for i := 1; i < m.next; i++ {
		if m.acked[i] {
			out = append(out, i)
		}
	}
	return out
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// healCases are faults that poison a handle. Sticky rules keep failing
// until cleared, as a full disk or a read-only remount does.
var healCases = map[string]faultfs.Rule{
	"ENOSPC short write on log":     {Kind: faultfs.OpWrite, Path: "events.jsonl", ShortWrite: true, Err: syscall.ENOSPC, Sticky: true},
	"ENOSPC on log write":           {Kind: faultfs.OpWrite, Path: "events.jsonl", Err: syscall.ENOSPC, Sticky: true},
	"ENOSPC on pending write":       {Kind: faultfs.OpWrite, Path: "events.pending", Err: syscall.ENOSPC, Sticky: true},
	"EROFS on pending write":        {Kind: faultfs.OpWrite, Path: "events.pending", Err: syscall.EROFS, Sticky: true},
	"EROFS on log write":            {Kind: faultfs.OpWrite, Path: "events.jsonl", Err: syscall.EROFS, Sticky: true},
	"EMFILE creating pending":       {Kind: faultfs.OpCreate, Path: "events.pending", Err: syscall.EMFILE, Sticky: true},
	"fsyncgate on log":              {Kind: faultfs.OpSync, Path: "events.jsonl", Err: syscall.EIO},
	"EIO fsync of pending":          {Kind: faultfs.OpSync, Path: "events.pending", Err: syscall.EIO},
	"EROFS on every mutating op":    {Kind: faultfs.OpAny, Err: syscall.EROFS, Sticky: true},
	"ENOSPC on every mutating op":   {Kind: faultfs.OpAny, Err: syscall.ENOSPC, Sticky: true},
	"short write on pending, fresh": {Kind: faultfs.OpWrite, Path: "events.pending", ShortWrite: true, Sticky: true},
}

// TestHealAfterFault: a handle poisoned by a fault refuses appends while
// the fault lasts and accepts them again, without being closed, once it is
// gone; the log then holds exactly the acknowledged entries, and a crash
// after the heal recovers the same.
func TestHealAfterFault(t *testing.T) {
	for name, rule := range healCases {
		for _, fresh := range []bool{false, true} {
			if rule.Kind == faultfs.OpCreate && !fresh {
				continue // only a fresh pending file is created
			}
			t.Run(name+map[bool]string{false: "", true: "/fresh pending"}[fresh], func(t *testing.T) {
				m := faultfs.NewMem()
				l := mustOpen(t, m, memPath)
				defer l.Close()
				mod := newModel()
				for i := 0; i < 3; i++ {
					if err := mod.append(t, l); err != nil {
						t.Fatal(err)
					}
				}
				if fresh {
					retireNow(l)
				}
				m.Inject(rule)
				if err := mod.append(t, l); !errors.Is(err, ErrPoisoned) {
					t.Fatalf("append under %s: %v, want ErrPoisoned", name, err)
				}
				if l.Degraded() == nil {
					t.Fatal("Degraded() is nil on a poisoned handle")
				}
				if l.LastSeq() != 3 {
					t.Fatalf("LastSeq %d after a failed append, want 3", l.LastSeq())
				}
				// While the fault lasts, a heal or an append may fail again;
				// nothing it does may add an entry.
				_ = l.Heal()
				_ = mod.append(t, l)
				m.ClearRules()
				if err := l.Heal(); err != nil {
					t.Fatalf("Heal after the fault cleared: %v", err)
				}
				if err := l.Degraded(); err != nil {
					t.Fatalf("Degraded after heal: %v", err)
				}
				if err := mod.append(t, l); err != nil {
					t.Fatalf("append after heal: %v", err)
				}
				if err := mod.batch(l, 2); err != nil {
					t.Fatalf("batch after heal: %v", err)
				}
				// Memory never runs ahead of (or behind) the log: the file is
				// exactly the acknowledged entries.
				if got, want := ids(t, m, memPath), ackedIDs(mod); !equalInts(got, want) {
					t.Fatalf("log after heal holds %v, acknowledged %v", got, want)
				}
				if l.LastSeq() != uint64(len(ackedIDs(mod))) {
					t.Fatalf("LastSeq %d, acknowledged %d", l.LastSeq(), len(ackedIDs(mod)))
				}
				// A power loss after the heal recovers the same entries:
				// the failed writes' remains were cut durably and their
				// pending file cannot be replayed.
				m.Crash()
				m.Reboot(faultfs.RebootOptions{Mode: faultfs.PowerLoss})
				l2 := mustOpen(t, m, memPath)
				defer l2.Close()
				if got, want := ids(t, m, memPath), ackedIDs(mod); !equalInts(got, want) {
					t.Fatalf("log after heal and a power loss holds %v, acknowledged %v", got, want)
				}
			})
		}
	}
}

// TestHealCutsTornWriteAndDropsPending: the failed group's bytes in the log
// (a short write) and its complete copy in the pending file (the log write
// failed after the pending fsync) are both gone after the heal, so a later
// Open cannot bring back an entry whose append was refused.
func TestHealCutsTornWriteAndDropsPending(t *testing.T) {
	m := faultfs.NewMem()
	l := mustOpen(t, m, memPath)
	defer l.Close()
	mustAppend(t, l, "a", nil)
	before := readBytes(t, m, memPath)
	m.Inject(faultfs.Rule{Kind: faultfs.OpWrite, Path: "events.jsonl", ShortWrite: true})
	if _, err := l.Append("refused", map[string]any{"x": 1}); !errors.Is(err, ErrPoisoned) {
		t.Fatalf("append: %v", err)
	}
	if b := readBytes(t, m, memPath); len(b) <= len(before) {
		t.Fatalf("the short write left nothing behind (%d bytes); the test needs a torn tail", len(b))
	}
	if ok, _ := faultfs.Exists(m, PendingPath(memPath)); !ok {
		t.Fatal("no pending file after a failed log write")
	}
	if err := l.Heal(); err != nil {
		t.Fatal(err)
	}
	if b := readBytes(t, m, memPath); !bytes.Equal(b, before) {
		t.Fatalf("after heal the log is %q, want %q", b, before)
	}
	if ok, _ := faultfs.Exists(m, PendingPath(memPath)); ok {
		t.Fatal("the pending file of the refused group survived the heal")
	}
	m.Crash()
	m.Reboot(faultfs.RebootOptions{Mode: faultfs.PowerLoss})
	es, err := ReadAll(m, memPath)
	if err != nil {
		t.Fatal(err)
	}
	l2 := mustOpen(t, m, memPath)
	defer l2.Close()
	es2, _ := ReadAll(m, memPath)
	if len(es) != 1 || len(es2) != 1 || es2[0].Event != "a" {
		t.Fatalf("after heal and power loss: %d entries, after Open %d; want only the acknowledged one", len(es), len(es2))
	}
}

// TestHealsByItself: with a positive backoff the handle reopens on its own
// once the fault is gone (no append needed), and says so through OnHeal.
func TestHealsByItself(t *testing.T) {
	m := faultfs.NewMem()
	healed := make(chan struct{}, 1)
	l, err := Open(m, memPath, Options{PendingIdle: -1, HealBackoff: 1, OnHeal: func() {
		select {
		case healed <- struct{}{}:
		default:
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	mustAppend(t, l, "a", nil)
	m.Inject(faultfs.Rule{Kind: faultfs.OpWrite, Path: "events.jsonl", Err: syscall.ENOSPC})
	if _, err := l.Append("b", nil); !errors.Is(err, ErrPoisoned) {
		t.Fatalf("append: %v", err)
	}
	select { // the rule was not sticky: the timer's reopen succeeds
	case <-healed:
	case <-time.After(10 * time.Second):
		t.Fatal("the poisoned handle did not reopen by itself")
	}
	if err := l.Degraded(); err != nil {
		t.Fatalf("Degraded after the timer healed it: %v", err)
	}
	e := mustAppend(t, l, "c", nil)
	if e.Seq != 2 {
		t.Fatalf("seq after heal %d, want 2", e.Seq)
	}
}

// TestHealRefusesChangedFile: a log changed on disk while the handle was
// poisoned (not by its own failed write) is not cut or appended to: the
// handle reports ErrChanged and stays refused.
func TestHealRefusesChangedFile(t *testing.T) {
	m := faultfs.NewMem()
	l := mustOpen(t, m, memPath)
	defer l.Close()
	mustAppend(t, l, "a", nil)
	mustAppend(t, l, "b", nil)
	m.Inject(faultfs.Rule{Kind: faultfs.OpWrite, Path: "events.pending", Err: syscall.ENOSPC})
	if _, err := l.Append("c", nil); !errors.Is(err, ErrPoisoned) {
		t.Fatalf("append: %v", err)
	}
	full := readBytes(t, m, memPath)
	ends := lineEnds(full)
	if err := m.Truncate(memPath, int64(ends[0])); err != nil {
		t.Fatal(err)
	}
	if err := l.Heal(); !errors.Is(err, ErrPoisoned) || l.Degraded() == nil || !errors.Is(l.Degraded(), ErrPoisoned) {
		t.Fatalf("Heal of a changed file: %v (degraded %v)", err, l.Degraded())
	}
	if d := l.Degraded(); !bytes.Contains([]byte(d.Error()), []byte(ErrChanged.Error())) {
		t.Fatalf("Degraded %v does not name the change", d)
	}
	if _, err := l.Append("d", nil); !errors.Is(err, ErrPoisoned) {
		t.Fatalf("append after a refused heal: %v", err)
	}
	if b := readBytes(t, m, memPath); len(b) != ends[0] {
		t.Fatalf("the changed file was modified: %d bytes, want %d", len(b), ends[0])
	}
}
