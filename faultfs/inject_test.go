package faultfs

import (
	"errors"
	"io/fs"
	"os"
	"slices"
	"syscall"
	"testing"
)

func openAppend(t *testing.T, m *Mem, name string) File {
	t.Helper()
	f, err := m.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	must(t, err)
	return f
}

func TestInjectNthWriteOnPath(t *testing.T) {
	m := NewMem()
	a := openAppend(t, m, "/d.log")
	b := openAppend(t, m, "/other")
	m.Inject(Rule{Kind: OpWrite, Path: ".log", Nth: 2, Err: syscall.EIO})
	before := m.MutatingOps()

	_, err := b.Write([]byte("x")) // other path: not counted by the rule
	must(t, err)
	_, err = a.Write([]byte("1")) // 1st match
	must(t, err)
	n, err := a.Write([]byte("2")) // 2nd match: fails, no effect
	if n != 0 || !errors.Is(err, syscall.EIO) || !errors.Is(err, ErrInjected) {
		t.Fatalf("2nd write = %d, %v; want 0 and EIO+ErrInjected", n, err)
	}
	var pe *fs.PathError
	if !errors.As(err, &pe) || pe.Path != "/d.log" {
		t.Fatalf("error %v does not name the path", err)
	}
	_, err = a.Write([]byte("3")) // not sticky: later writes work
	must(t, err)
	wantContent(t, m, "/d.log", []byte("13"))
	if got := m.MutatingOps() - before; got != 4 {
		t.Fatalf("failed op not counted: %d ops, want 4", got)
	}
}

func TestInjectSticky(t *testing.T) {
	m := NewMem()
	f := openAppend(t, m, "/f")
	m.Inject(Rule{Kind: OpWrite, Nth: 2, Err: syscall.ENOSPC, Sticky: true})
	var errs []bool
	for i := 0; i < 5; i++ {
		_, err := f.Write([]byte{'a' + byte(i)})
		errs = append(errs, errors.Is(err, syscall.ENOSPC))
	}
	if want := []bool{false, true, true, true, true}; !slices.Equal(errs, want) {
		t.Fatalf("failures %v, want %v", errs, want)
	}
	wantContent(t, m, "/f", []byte("a"))
	m.ClearRules()
	_, err := f.Write([]byte("z"))
	must(t, err)
	wantContent(t, m, "/f", []byte("az"))
}

func TestInjectEveryMutatingKindHasNoEffect(t *testing.T) {
	for _, tc := range []struct {
		kind  OpKind
		run   func(m *Mem) error
		check func(t *testing.T, m *Mem)
	}{
		{OpCreate, func(m *Mem) error { _, err := m.OpenFile("/new", os.O_CREATE|os.O_WRONLY, 0o644); return err },
			func(t *testing.T, m *Mem) { wantAbsent(t, m, "/new") }},
		{OpRename, func(m *Mem) error { return m.Rename("/f", "/g") },
			func(t *testing.T, m *Mem) { wantContent(t, m, "/f", []byte("data")); wantAbsent(t, m, "/g") }},
		{OpRemove, func(m *Mem) error { return m.Remove("/f") },
			func(t *testing.T, m *Mem) { wantContent(t, m, "/f", []byte("data")) }},
		{OpTruncate, func(m *Mem) error { return m.Truncate("/f", 1) },
			func(t *testing.T, m *Mem) { wantContent(t, m, "/f", []byte("data")) }},
		{OpMkdir, func(m *Mem) error { return m.MkdirAll("/a/b", 0o755) },
			func(t *testing.T, m *Mem) { wantAbsent(t, m, "/a") }},
		{OpSyncDir, func(m *Mem) error { return m.SyncDir("/") },
			func(t *testing.T, m *Mem) {
				m.Reboot(RebootOptions{})
				wantAbsent(t, m, "/f") // the entry never became durable
			}},
	} {
		t.Run(tc.kind.String(), func(t *testing.T) {
			m := NewMem()
			mustWrite(t, m, "/f", []byte("data"))
			m.Inject(Rule{Kind: tc.kind, Err: syscall.EIO})
			if err := tc.run(m); !errors.Is(err, syscall.EIO) || !errors.Is(err, ErrInjected) {
				t.Fatalf("%v: error %v, want injected EIO", tc.kind, err)
			}
			tc.check(t, m)
		})
	}
}

func TestInjectDefaultsAndAnyKind(t *testing.T) {
	m := NewMem()
	m.Inject(Rule{Path: "/x"}) // OpAny, Nth 1, default EIO
	if err := m.MkdirAll("/y", 0o755); err != nil {
		t.Fatalf("non-matching path failed: %v", err)
	}
	if err := m.MkdirAll("/x", 0o755); !errors.Is(err, syscall.EIO) {
		t.Fatalf("OpAny rule: %v, want EIO", err)
	}
	// OpAny never matches reads.
	m.Inject(Rule{Kind: OpAny, Path: "/y", Sticky: true})
	if _, err := m.Stat("/y"); err != nil {
		t.Fatalf("OpAny matched a read: %v", err)
	}
	// A rename matches on its new path too.
	m.ClearRules()
	mustWrite(t, m, "/a", nil)
	m.Inject(Rule{Kind: OpRename, Path: "/b"})
	if err := m.Rename("/a", "/b"); !errors.Is(err, ErrInjected) {
		t.Fatalf("rename to matching path: %v, want injected", err)
	}
}

func TestInjectReads(t *testing.T) {
	m := NewMem()
	mustWrite(t, m, "/f", []byte("data"))
	m.Inject(Rule{Kind: OpRead, Path: "/f", Err: syscall.EIO})
	if _, err := ReadFile(m, "/f"); !errors.Is(err, syscall.EIO) {
		t.Fatalf("injected read error: %v", err)
	}
	wantContent(t, m, "/f", []byte("data"))
	for _, kind := range []OpKind{OpOpen, OpStat, OpReadDir} {
		m.Inject(Rule{Kind: kind})
	}
	if _, err := m.OpenFile("/f", os.O_RDONLY, 0); !errors.Is(err, ErrInjected) {
		t.Fatalf("open: %v", err)
	}
	if _, err := m.Stat("/f"); !errors.Is(err, ErrInjected) {
		t.Fatalf("stat: %v", err)
	}
	if _, err := m.ReadDir("/"); !errors.Is(err, ErrInjected) {
		t.Fatalf("readdir: %v", err)
	}
}

func TestShortWrite(t *testing.T) {
	m := NewMem()
	f := openAppend(t, m, "/f")
	m.Inject(Rule{Kind: OpWrite, ShortWrite: true})
	p := []byte("0123456789")
	n, err := f.Write(p)
	if n >= len(p) || n != 5 {
		t.Fatalf("short write n = %d, want 5 < %d", n, len(p))
	}
	if !errors.Is(err, syscall.ENOSPC) || !errors.Is(err, ErrInjected) {
		t.Fatalf("short write error %v, want ENOSPC (default) + ErrInjected", err)
	}
	wantContent(t, m, "/f", []byte("01234"))
	// The writer may continue after the torn prefix, as on a real disk.
	_, err = f.Write([]byte("!"))
	must(t, err)
	wantContent(t, m, "/f", []byte("01234!"))

	m.Inject(Rule{Kind: OpWrite, ShortWrite: true, Err: syscall.EIO})
	if n, err := f.Write([]byte("ab")); n != 1 || !errors.Is(err, syscall.EIO) {
		t.Fatalf("short write with EIO = %d %v", n, err)
	}
}

func TestFsyncgate(t *testing.T) {
	m := NewMem()
	f := openAppend(t, m, "/f")
	must(t, m.SyncDir("/"))
	_, err := f.Write([]byte("durable"))
	must(t, err)
	must(t, f.Sync())
	_, err = f.Write([]byte("+lost"))
	must(t, err)

	m.Inject(Rule{Kind: OpSync, Path: "/f", Err: syscall.EIO})
	if err := f.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("sync: %v, want injected EIO", err)
	}
	// The dirty data is gone, and the retry "succeeds".
	wantContent(t, m, "/f", []byte("durable"))
	if err := f.Sync(); err != nil {
		t.Fatalf("sync after fsyncgate: %v, want nil", err)
	}
	m.Reboot(RebootOptions{Mode: PowerLoss, Tail: TailPrefix})
	wantContent(t, m, "/f", []byte("durable"))
}

func TestInjectedRulesSurviveReboot(t *testing.T) {
	m := NewMem()
	m.Inject(Rule{Kind: OpMkdir, Nth: 2})
	must(t, m.MkdirAll("/a", 0o755))
	m.Reboot(RebootOptions{})
	if err := m.MkdirAll("/b", 0o755); !errors.Is(err, ErrInjected) {
		t.Fatalf("rule lost across reboot: %v", err)
	}
}

func TestCrashTakesPrecedenceOverInjection(t *testing.T) {
	m := NewMem()
	m.Inject(Rule{Kind: OpMkdir})
	m.CrashAt(1)
	if err := m.MkdirAll("/a", 0o755); !errors.Is(err, ErrCrashed) || errors.Is(err, ErrInjected) {
		t.Fatalf("crash op: %v, want ErrCrashed only", err)
	}
}

func TestRuleCrash(t *testing.T) {
	m := NewMem()
	must(t, m.MkdirAll("/d", 0o755))
	f := openAppend(t, m, "/d/events.jsonl")
	g := openAppend(t, m, "/d/other")
	m.Inject(Rule{Kind: OpSync, Path: "/events.jsonl", Nth: 2, Crash: true})
	must(t, g.Sync())
	_, err := f.Write([]byte("one\n"))
	must(t, err)
	must(t, f.Sync())
	_, err = f.Write([]byte("two\n"))
	must(t, err)
	if err := f.Sync(); !errors.Is(err, ErrCrashed) || errors.Is(err, ErrInjected) {
		t.Fatalf("2nd sync of events.jsonl: %v, want ErrCrashed", err)
	}
	if !m.Crashed() {
		t.Fatal("Crash rule did not crash the filesystem")
	}
	if _, err := m.Stat("/d"); !errors.Is(err, ErrCrashed) {
		t.Fatalf("op after crash rule: %v", err)
	}
	m.Reboot(RebootOptions{Mode: ProcessCrash})
	wantContent(t, m, "/d/events.jsonl", []byte("one\ntwo\n"))

	// A crash rule on a write tears it like CrashAt does.
	m.ClearRules()
	f = openAppend(t, m, "/d/events.jsonl")
	m.Inject(Rule{Kind: OpWrite, Crash: true})
	if _, err := f.Write([]byte("three\n")); !errors.Is(err, ErrCrashed) {
		t.Fatalf("crashing write: %v", err)
	}
	m.Reboot(RebootOptions{Mode: ProcessCrash})
	wantContent(t, m, "/d/events.jsonl", []byte("one\ntwo\n"))
}
