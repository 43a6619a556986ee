package eventlog

import (
	"errors"
	"syscall"
	"testing"

	"github.com/warren-dev/warren/faultfs"
)

// runFault injects rule after two acknowledged appends (and, with fresh,
// the idle removal of the pending file), expects the third append to fail
// and poison the handle, then checks recovery after a reboot.
func runFault(t *testing.T, rule faultfs.Rule, wantErr error, reboot faultfs.RebootOptions, fresh bool) {
	t.Helper()
	m := faultfs.NewMem()
	l := mustOpen(t, m, memPath)
	mod := newModel()
	for i := 0; i < 2; i++ {
		mod.append(t, l)
	}
	if fresh {
		retireNow(l)
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
		rule  faultfs.Rule
		err   error
		fresh bool // the failing append creates the pending file
	}{
		"fsyncgate on log":             {faultfs.Rule{Kind: faultfs.OpSync, Path: "events.jsonl"}, syscall.EIO, false},
		"fsyncgate on pending":         {faultfs.Rule{Kind: faultfs.OpSync, Path: "events.pending"}, syscall.EIO, false},
		"short write on log":           {faultfs.Rule{Kind: faultfs.OpWrite, Path: "events.jsonl", ShortWrite: true}, syscall.ENOSPC, false},
		"short write on pending":       {faultfs.Rule{Kind: faultfs.OpWrite, Path: "events.pending", ShortWrite: true}, syscall.ENOSPC, false},
		"ENOSPC on log write":          {faultfs.Rule{Kind: faultfs.OpWrite, Path: "events.jsonl", Err: syscall.ENOSPC}, syscall.ENOSPC, false},
		"EIO creating pending":         {faultfs.Rule{Kind: faultfs.OpCreate, Path: "events.pending"}, syscall.EIO, true},
		"fsyncgate on fresh pending":   {faultfs.Rule{Kind: faultfs.OpSync, Path: "events.pending"}, syscall.EIO, true},
		"short write on fresh pending": {faultfs.Rule{Kind: faultfs.OpWrite, Path: "events.pending", ShortWrite: true}, syscall.ENOSPC, true},
	}
	for name, c := range cases {
		for rname, r := range reboots {
			t.Run(name+"/"+rname, func(t *testing.T) { runFault(t, c.rule, c.err, r, c.fresh) })
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

func TestPendingRemoveFailureLosesNothing(t *testing.T) {
	// Removing the pending file happens when the log goes idle and at
	// Close, after its groups are durable in the log: a failure there is
	// reported (Close) or logged (idle) but never unacknowledges or
	// poisons anything.
	m := faultfs.NewMem()
	l := mustOpen(t, m, memPath)
	m.Inject(faultfs.Rule{Kind: faultfs.OpRemove, Path: "events.pending", Err: syscall.EIO})
	if e, err := l.Append("one", nil); err != nil || e.Seq != 1 {
		t.Fatalf("durable entry not acknowledged: %v", err)
	}
	retireNow(l) // the idle removal fails
	if ok, _ := faultfs.Exists(m, PendingPath(memPath)); !ok {
		t.Fatal("setup: the injected remove failure did not keep the pending file")
	}
	// The next group truncates the stale file and writes its own.
	if e, err := l.Append("two", nil); err != nil || e.Seq != 2 {
		t.Fatalf("append after a failed idle removal: %+v %v", e, err)
	}
	m.Inject(faultfs.Rule{Kind: faultfs.OpRemove, Path: "events.pending", Err: syscall.EIO})
	if err := l.Close(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Close with a failing pending removal: %v, want EIO", err)
	}
	m.ClearRules()
	m.Crash()
	m.Reboot(faultfs.RebootOptions{Mode: faultfs.PowerLoss, Tail: faultfs.TailGarbage})
	l = mustOpen(t, m, memPath)
	defer l.Close()
	if l.LastSeq() != 2 {
		t.Fatalf("LastSeq %d, want 2", l.LastSeq())
	}
	if ok, _ := faultfs.Exists(m, PendingPath(memPath)); ok {
		t.Fatal("Open left the stale pending file")
	}
}
