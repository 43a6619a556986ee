package faultfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"slices"
	"syscall"
	"testing"
)

func TestMemOpenFlags(t *testing.T) {
	m := NewMem()
	must(t, m.MkdirAll("/d", 0o755))

	if _, err := m.OpenFile("/d/x", os.O_RDONLY, 0); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("open missing without O_CREATE: %v, want ErrNotExist", err)
	}
	mustWrite(t, m, "/d/x", []byte("hello"))
	if _, err := m.OpenFile("/d/x", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("O_EXCL on existing: %v, want ErrExist", err)
	}

	// O_APPEND writes at the end whatever the offset.
	f, err := m.OpenFile("/d/x", os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	if _, err := f.Write([]byte(" world")); err != nil {
		t.Fatal(err)
	}
	must(t, f.Close())
	wantContent(t, m, "/d/x", []byte("hello world"))

	// O_TRUNC empties it.
	f, err = m.OpenFile("d/x", os.O_RDWR|os.O_TRUNC, 0)
	must(t, err)
	if fi, err := f.Stat(); err != nil || fi.Size() != 0 || fi.Name() != "x" {
		t.Fatalf("after O_TRUNC stat = %v, %v; want size 0 named x", fi, err)
	}
	// Plain write at offset 0, read back through ReadAt.
	if _, err := f.Write([]byte("abc")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 3)
	if n, err := f.ReadAt(buf, 0); n != 3 || err != nil || string(buf) != "abc" {
		t.Fatalf("ReadAt = %d %v %q", n, err, buf)
	}
	if n, err := f.ReadAt(buf, 2); n != 1 || err != io.EOF {
		t.Fatalf("ReadAt past end = %d %v, want 1 EOF", n, err)
	}
	must(t, f.Close())
	if _, err := f.Write([]byte("x")); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("write after close: %v, want ErrClosed", err)
	}

	// Access modes are enforced.
	r, err := m.OpenFile("/d/x", os.O_RDONLY, 0)
	must(t, err)
	if _, err := r.Write([]byte("x")); !errors.Is(err, syscall.EBADF) {
		t.Fatalf("write on O_RDONLY: %v, want EBADF", err)
	}
	w, err := m.OpenFile("/d/x", os.O_WRONLY, 0)
	must(t, err)
	if _, err := w.Read(buf); !errors.Is(err, syscall.EBADF) {
		t.Fatalf("read on O_WRONLY: %v, want EBADF", err)
	}

	// Directories open read-only only.
	if _, err := m.OpenFile("/d", os.O_WRONLY, 0); !errors.Is(err, syscall.EISDIR) {
		t.Fatalf("open dir for write: %v, want EISDIR", err)
	}
	// A file is not a directory.
	if _, err := m.OpenFile("/d/x/y", os.O_RDONLY, 0); !errors.Is(err, syscall.ENOTDIR) {
		t.Fatalf("open below a file: %v, want ENOTDIR", err)
	}
}

func TestMemDirOps(t *testing.T) {
	m := NewMem()
	must(t, m.MkdirAll("/a/b/c", 0o700))
	must(t, m.MkdirAll("/a/b/c", 0o700)) // idempotent
	mustWrite(t, m, "/a/b/f", []byte("1"))
	mustWrite(t, m, "/a/b/e", []byte("22"))

	ents, err := m.ReadDir("/a/b")
	must(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"c", "e", "f"}) {
		t.Fatalf("ReadDir = %v, want sorted [c e f]", names)
	}
	if !ents[0].IsDir() || ents[1].IsDir() {
		t.Fatalf("IsDir wrong: %v", ents)
	}
	if err := m.MkdirAll("/a/b/f/g", 0o700); !errors.Is(err, syscall.ENOTDIR) {
		t.Fatalf("MkdirAll below a file: %v, want ENOTDIR", err)
	}
	if err := m.Remove("/a/b"); !errors.Is(err, syscall.ENOTEMPTY) {
		t.Fatalf("remove non-empty dir: %v, want ENOTEMPTY", err)
	}
	must(t, m.Remove("/a/b/c"))
	if err := m.Remove("/a/b/c"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("remove twice: %v, want ErrNotExist", err)
	}
	must(t, m.Truncate("/a/b/e", 5))
	wantContent(t, m, "/a/b/e", []byte("22\x00\x00\x00"))
	must(t, m.Truncate("/a/b/e", 1))
	wantContent(t, m, "/a/b/e", []byte("2"))

	// Rename replaces a file; renaming a dir into itself fails.
	must(t, m.Rename("/a/b/e", "/a/b/f"))
	wantContent(t, m, "/a/b/f", []byte("2"))
	wantAbsent(t, m, "/a/b/e")
	if err := m.Rename("/a", "/a/b/z"); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("rename dir into itself: %v, want EINVAL", err)
	}
	if err := m.Rename("/a/b/f", "/a/b"); err == nil {
		t.Fatal("rename file over non-empty dir succeeded")
	}
	if ok, err := Exists(m, "/a/b/f"); !ok || err != nil {
		t.Fatalf("Exists = %v %v", ok, err)
	}
	if ok, err := Exists(m, "/nope"); ok || err != nil {
		t.Fatalf("Exists(missing) = %v %v, want false nil", ok, err)
	}
}

func TestMemOpenFileFollowsRename(t *testing.T) {
	m := NewMem()
	f, err := m.OpenFile("/old", os.O_WRONLY|os.O_CREATE, 0o644)
	must(t, err)
	must(t, m.Rename("/old", "/new"))
	if _, err := f.Write([]byte("after")); err != nil {
		t.Fatal(err)
	}
	must(t, f.Close())
	wantContent(t, m, "/new", []byte("after"))
	wantAbsent(t, m, "/old")
}

func TestMemStatAndPaths(t *testing.T) {
	m := NewMem()
	must(t, m.MkdirAll("x/y", 0o750))
	fi, err := m.Stat("/x/./y/")
	must(t, err)
	if !fi.IsDir() || fi.Name() != "y" || fi.Mode().Perm() != 0o750 {
		t.Fatalf("Stat = %v %v %v", fi.IsDir(), fi.Name(), fi.Mode())
	}
	if _, err := m.Stat(""); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Stat(\"\") = %v, want ErrNotExist", err)
	}
	if fi, err := m.Stat("/"); err != nil || !fi.IsDir() {
		t.Fatalf("Stat(/) = %v %v", fi, err)
	}
}

func TestMemRefusesHugeFiles(t *testing.T) {
	m := NewMem()
	f, err := m.OpenFile("/f", os.O_RDWR|os.O_CREATE, 0o644)
	must(t, err)
	if err := m.Truncate("/f", 1<<62); !errors.Is(err, syscall.EFBIG) {
		t.Fatalf("Truncate huge: %v, want EFBIG", err)
	}
	if err := f.Truncate(MaxMemFileSize + 1); !errors.Is(err, syscall.EFBIG) {
		t.Fatalf("File.Truncate huge: %v, want EFBIG", err)
	}
	if err := f.Truncate(-1); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("File.Truncate negative: %v, want EINVAL", err)
	}
	if _, err := f.ReadAt(make([]byte, 1), 1<<62); err != io.EOF {
		t.Fatalf("ReadAt far past the end: %v, want EOF", err)
	}
	if _, err := f.ReadAt(make([]byte, 1), -1); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("ReadAt negative: %v, want EINVAL", err)
	}
}
