package eventlog

import (
	"errors"
	"syscall"
	"testing"

	"github.com/warren-dev/warren/faultfs"
)

// faultCase injects rule after two acknowledged appends, expects the third
// append to fail and poison the handle, then checks recovery after a
// reboot.
func runFault(t *testing.T, rule faultfs.Rule, wantErr error, reboot faultfs.RebootOptions) {
	t.Helper()
	m := faultfs.NewMem()
	l := mustOpen(t, m, memPath)
	mod := newModel()
	for i := 0; i < 2; i++ {
		mod.append(t, l)
	}
	m.Inject(rule)
	err := mod.append(t, l)
	if err == nil {
		t.Fatal("append with an injected fault was acknowledged")
	}
	if !errors.Is(err, wantErr) || !errors.Is(err, ErrPoisoned) {
		t.Fatalf("append error %v, want %v and ErrPoisoned", err, wantErr)
	}
	if _, err := l.Append("later", nil); !errors.Is(err, ErrPoisoned) {
		t.Fatalf("append on poisoned handle: %v", err)
	}
	if _, err := l.AppendBatch([]Record{{Event: "later"}}); !errors.Is(err, ErrPoisoned) {
		t.Fatalf("batch on poisoned handle: %v", err)
	}
	if l.LastSeq() != 2 {
		t.Fatalf("LastSeq %d after failed append", l.LastSeq())
	}
	l.Close()
	m.ClearRules()
	m.Crash()
	m.Reboot(reboot)
	mod.check(t, m)
	// The reopened log accepts appends again.
	l = mustOpen(t, m, memPath)
	mod.append(t, l)
	l.Close()
	mod.check(t, m)
}

func TestFaultsPoisonAndRecover(t *testing.T) {
	reboots := map[string]faultfs.RebootOptions{
		"process crash":           {Mode: faultfs.ProcessCrash},
		"power loss":              {Mode: faultfs.PowerLoss},
		"power loss garbage tail": {Mode: faultfs.PowerLoss, Tail: faultfs.TailGarbage},
	}
	cases := map[string]struct {
		rule faultfs.Rule
		err  error
	}{
		"fsyncgate on log":       {faultfs.Rule{Kind: faultfs.OpSync, Path: "events.jsonl"}, syscall.EIO},
		"fsyncgate on pending":   {faultfs.Rule{Kind: faultfs.OpSync, Path: "events.pending"}, syscall.EIO},
		"short write on log":     {faultfs.Rule{Kind: faultfs.OpWrite, Path: "events.jsonl", ShortWrite: true}, syscall.ENOSPC},
		"short write on pending": {faultfs.Rule{Kind: faultfs.OpWrite, Path: "events.pending", ShortWrite: true}, syscall.ENOSPC},
		"ENOSPC on log write":    {faultfs.Rule{Kind: faultfs.OpWrite, Path: "events.jsonl", Err: syscall.ENOSPC}, syscall.ENOSPC},
		"EIO creating pending":   {faultfs.Rule{Kind: faultfs.OpCreate, Path: "events.pending"}, syscall.EIO},
	}
	for name, c := range cases {
		for rname, r := range reboots {
			t.Run(name+"/"+rname, func(t *testing.T) { runFault(t, c.rule, c.err, r) })
		}
	}
}

func TestShortWriteLeavesNoLineBehindWhichAppendsFollow(t *testing.T) {
	m := faultfs.NewMem()
	l := mustOpen(t, m, memPath)
	mustAppend(t, l, "one", nil)
	m.Inject(faultfs.Rule{Kind: faultfs.OpWrite, Path: "events.jsonl", ShortWrite: true})
	if _, err := l.Append("two", nil); err == nil {
		t.Fatal("short write acknowledged")
	}
	for i := 0; i < 3; i++ {
		if _, err := l.Append("more", nil); !errors.Is(err, ErrPoisoned) {
			t.Fatalf("append after short write: %v", err)
		}
	}
	// The half line is the last thing in the file: a torn tail.
	l.Close()
	l = mustOpen(t, m, memPath)
	defer l.Close()
	es, err := ReadAll(m, memPath)
	if err != nil {
		t.Fatal(err)
	}
	// "two" was in the fsynced pending file, so it may be replayed.
	if len(es) < 1 || len(es) > 2 || es[0].Event != "one" || (len(es) == 2 && es[1].Event != "two") {
		t.Fatalf("entries %+v", es)
	}
}

func TestPendingRemoveFailureAcksAndPoisons(t *testing.T) {
	m := faultfs.NewMem()
	l := mustOpen(t, m, memPath)
	m.Inject(faultfs.Rule{Kind: faultfs.OpRemove, Path: "events.pending"})
	e, err := l.Append("one", nil)
	if err != nil || e.Seq != 1 {
		t.Fatalf("durable entry not acknowledged: %v", err)
	}
	if _, err := l.Append("two", nil); !errors.Is(err, ErrPoisoned) || !errors.Is(err, ErrPoisoned) {
		t.Fatalf("got %v", err)
	}
	l.Close()
	m.ClearRules()
	l = mustOpen(t, m, memPath)
	defer l.Close()
	if l.LastSeq() != 1 {
		t.Fatalf("LastSeq %d", l.LastSeq())
	}
}
