//go:build linux

package faultfs

import (
	"path/filepath"
	"testing"
)

func TestKernelAtLeast(t *testing.T) {
	for _, c := range []struct {
		release string
		want    bool
	}{
		{"6.1.0-13-amd64", true}, {"5.8.0", true}, {"5.8-rc1", true}, {"5.10.0", true},
		{"5.7.19", false}, {"4.19.0", false}, {"5", false}, {"", false}, {"x.y", false},
	} {
		if got := kernelAtLeast(c.release, 5, 8); got != c.want {
			t.Errorf("kernelAtLeast(%q, 5, 8) = %v; want %v", c.release, got, c.want)
		}
	}
}

// TestOSSyncFS: syncfs on a real directory succeeds on this kernel, and a
// missing path is an error naming it.
func TestOSSyncFS(t *testing.T) {
	dir := t.TempDir()
	if !syncfsReportsErrors() {
		t.Skip("kernel before 5.8: SyncFS is unsupported here by design")
	}
	if err := (OS{}).SyncFS(dir); err != nil {
		t.Fatal(err)
	}
	if err := (OS{}).SyncFS(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("SyncFS of a missing path succeeded")
	}
}
