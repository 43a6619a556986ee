package faultfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestOSRoundTripAndSyncDir(t *testing.T) {
	dir := t.TempDir()
	var fsys FS = OS{}
	sub := filepath.Join(dir, "a", "b")
	must(t, fsys.MkdirAll(sub, 0o755))
	p := filepath.Join(sub, "f")
	mustWrite(t, fsys, p, []byte("hello"))
	mustSyncFile(t, fsys, p)
	must(t, fsys.SyncDir(sub))
	wantContent(t, fsys, p, []byte("hello"))
	must(t, fsys.Rename(p, p+"2"))
	wantAbsent(t, fsys, p)
	must(t, fsys.Truncate(p+"2", 2))
	wantContent(t, fsys, p+"2", []byte("he"))
	ents, err := fsys.ReadDir(sub)
	must(t, err)
	if len(ents) != 1 || ents[0].Name() != "f2" {
		t.Fatalf("ReadDir = %v", ents)
	}
	must(t, fsys.Remove(p+"2"))
	if ok, err := Exists(fsys, p+"2"); ok || err != nil {
		t.Fatalf("Exists after remove = %v %v", ok, err)
	}
	if err := fsys.SyncDir(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("SyncDir(missing) = %v, want ErrNotExist", err)
	}
}

// TestMemMatchesOS runs the same operations on OS and Mem and checks that
// both succeed or fail alike, so crash tests on Mem exercise real semantics.
func TestMemMatchesOS(t *testing.T) {
	root := t.TempDir()
	type step struct {
		name string
		run  func(fsys FS, p func(string) string) error
	}
	open := func(name string, flag int) func(FS, func(string) string) error {
		return func(fsys FS, p func(string) string) error {
			f, err := fsys.OpenFile(p(name), flag, 0o644)
			if err != nil {
				return err
			}
			return f.Close()
		}
	}
	steps := []step{
		{"open missing", open("x", os.O_RDONLY)},
		{"create", open("x", os.O_WRONLY|os.O_CREATE)},
		{"create excl existing", open("x", os.O_WRONLY|os.O_CREATE|os.O_EXCL)},
		{"open dir for write", open("", os.O_WRONLY)},
		{"open below file", open("x/y", os.O_RDONLY)},
		{"mkdir", func(fsys FS, p func(string) string) error { return fsys.MkdirAll(p("d/e"), 0o755) }},
		{"mkdir below file", func(fsys FS, p func(string) string) error { return fsys.MkdirAll(p("x/e"), 0o755) }},
		{"remove non-empty", func(fsys FS, p func(string) string) error { return fsys.Remove(p("d")) }},
		{"rename file over dir", func(fsys FS, p func(string) string) error { return fsys.Rename(p("x"), p("d")) }},
		{"rename missing", func(fsys FS, p func(string) string) error { return fsys.Rename(p("nope"), p("z")) }},
		{"rename dir into itself", func(fsys FS, p func(string) string) error { return fsys.Rename(p("d"), p("d/e/f")) }},
		{"rename", func(fsys FS, p func(string) string) error { return fsys.Rename(p("x"), p("d/x")) }},
		{"truncate missing", func(fsys FS, p func(string) string) error { return fsys.Truncate(p("x"), 0) }},
		{"truncate dir", func(fsys FS, p func(string) string) error { return fsys.Truncate(p("d"), 0) }},
		{"syncdir file", func(fsys FS, p func(string) string) error { return fsys.SyncDir(p("d/x")) }},
		{"readdir file", func(fsys FS, p func(string) string) error { _, err := fsys.ReadDir(p("d/x")); return err }},
		{"remove dir", func(fsys FS, p func(string) string) error { return fsys.Remove(p("d/e")) }},
		{"remove missing", func(fsys FS, p func(string) string) error { return fsys.Remove(p("d/e")) }},
	}
	m := NewMem()
	must(t, m.MkdirAll(root, 0o755))
	for _, s := range steps {
		p := func(n string) string { return filepath.Join(root, n) }
		osErr := s.run(OS{}, p)
		memErr := s.run(m, p)
		if (osErr == nil) != (memErr == nil) {
			t.Errorf("%s: OS error %v, Mem error %v", s.name, osErr, memErr)
			continue
		}
		for _, target := range []error{fs.ErrNotExist, fs.ErrExist} {
			if errors.Is(osErr, target) != errors.Is(memErr, target) {
				t.Errorf("%s: OS %v vs Mem %v disagree on %v", s.name, osErr, memErr, target)
			}
		}
		if oe, me := innermost(osErr), innermost(memErr); oe != me {
			t.Errorf("%s: OS errno %v, Mem errno %v", s.name, oe, me)
		}
	}
}
