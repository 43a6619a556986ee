package faultfs

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"
)

// TestReadFileSizes: ReadFile returns a file's bytes exactly, whatever its
// size around the buffer it sizes from Stat, on the OS and in memory.
func TestReadFileSizes(t *testing.T) {
	for _, fs := range []struct {
		name string
		fsys FS
		dir  string
	}{{"mem", NewMem(), "/d"}, {"os", OS{}, t.TempDir()}} {
		if err := fs.fsys.MkdirAll(fs.dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{0, 1, 511, 512, 513, 4096, 12345, 200_000} {
			path := filepath.Join(fs.dir, fmt.Sprint(n))
			want := bytes.Repeat([]byte("0123456789abcdef"), n/16+1)[:n]
			if err := WriteFile(fs.fsys, path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := ReadFile(fs.fsys, path)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%s: ReadFile of %d bytes: %d bytes, %v", fs.name, n, len(got), err)
			}
		}
	}
}
