//go:build linux

package faultfs

import (
	"errors"
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

// TestOSSyncFS: on this machine's filesystem (ext4 here; the test says so
// when it is another) OpenFS and its Sync succeed, and a missing path is an
// error naming it.
func TestOSSyncFS(t *testing.T) {
	dir := t.TempDir()
	h, err := (OS{}).OpenFS(dir)
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skipf("syncfs is refused here by design: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := (OS{}).OpenFS(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("OpenFS of a missing path succeeded")
	}
}

func TestTrustedSyncfs(t *testing.T) {
	if !trustedSyncfs(0xEF53) || trustedSyncfs(0x65735546 /* FUSE */) || trustedSyncfs(0x794c7630 /* overlayfs */) {
		t.Fatal("ext4 must be trusted, FUSE and overlayfs not")
	}
}
