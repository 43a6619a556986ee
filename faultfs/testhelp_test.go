package faultfs

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"testing"
)

// mustWrite creates (or truncates) name and writes data without syncing.
func mustWrite(t *testing.T, fsys FS, name string, data []byte) {
	t.Helper()
	if err := WriteFile(fsys, name, data, 0o644); err != nil {
		t.Fatalf("WriteFile(%s): %v", name, err)
	}
}

// mustSyncFile opens name and fsyncs it.
func mustSyncFile(t *testing.T, fsys FS, name string) {
	t.Helper()
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("sync %s: %v", name, err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("close %s: %v", name, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// wantContent asserts that name exists with exactly want.
func wantContent(t *testing.T, fsys FS, name string, want []byte) {
	t.Helper()
	got, err := ReadFile(fsys, name)
	if err != nil {
		t.Fatalf("ReadFile(%s): %v", name, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s = %q, want %q", name, got, want)
	}
}

// wantAbsent asserts that name does not exist.
func wantAbsent(t *testing.T, fsys FS, name string) {
	t.Helper()
	_, err := fsys.Stat(name)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Stat(%s) = %v, want ErrNotExist", name, err)
	}
}
