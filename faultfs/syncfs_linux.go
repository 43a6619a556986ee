//go:build linux

package faultfs

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// trustedSyncfs reports whether a filesystem (statfs f_type) writes
// everything back on syncfs, waits for it and reports a failed writeback:
// ext4, xfs, btrfs, tmpfs. Others are left to per-file fsync: FUSE (sshfs,
// virtiofs before Linux 5.15) never asks its server to flush on syncfs,
// and overlayfs passes the failures of the filesystem beneath on only in
// recent kernels.
func trustedSyncfs(fsType int64) bool {
	switch fsType {
	case 0xEF53, 0x58465342, 0x9123683E, 0x01021994:
		return true
	}
	return false
}

// OpenFS opens name (a directory, typically) and keeps it open: its Sync
// is syncfs(2) on that descriptor, one flush of the whole filesystem, and
// reports every writeback failure on the filesystem since the open, once.
// It refuses, with errors.ErrUnsupported, a kernel before 5.8 (whose syncfs
// reports no writeback failure) and a filesystem trustedSyncfs does not
// name.
func (OS) OpenFS(name string) (FileSystem, error) {
	if !syncfsReportsErrors() {
		return nil, fmt.Errorf("faultfs: syncfs on this kernel does not report writeback errors (Linux 5.8 or later does): %w", errors.ErrUnsupported)
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("faultfs: open for syncfs: %w", err)
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		_ = f.Close()
		return nil, &os.PathError{Op: "statfs", Path: name, Err: err}
	}
	if !trustedSyncfs(int64(st.Type)) { //nolint:unconvert // Type's width differs by platform
		_ = f.Close()
		return nil, fmt.Errorf("faultfs: %s is on a filesystem (type %#x) whose syncfs warren does not trust: %w", name, st.Type, errors.ErrUnsupported)
	}
	return osFileSystem{f}, nil
}

type osFileSystem struct{ f *os.File }

// Sync is syncfs(2).
func (o osFileSystem) Sync() error {
	if err := unix.Syncfs(int(o.f.Fd())); err != nil {
		return &os.PathError{Op: "syncfs", Path: o.f.Name(), Err: err}
	}
	return nil
}

func (o osFileSystem) Close() error { return o.f.Close() }

// syncfsReportsErrors reports whether the running kernel is Linux 5.8 or
// later.
func syncfsReportsErrors() bool {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	return kernelAtLeast(unix.ByteSliceToString(u.Release[:]), 5, 8)
}

// kernelAtLeast reports whether a release string such as "6.1.0-13-amd64"
// is major.minor or later.
func kernelAtLeast(release string, major, minor int) bool {
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(leadingDigits(parts[1]))
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || (ma == major && mi >= minor)
}

// leadingDigits is s up to its first non-digit ("8-rc1" gives "8").
func leadingDigits(s string) string {
	for i, r := range s {
		if r < '0' || r > '9' {
			return s[:i]
		}
	}
	return s
}
