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

// SyncFS opens name and calls syncfs(2) on it: one flush of the whole
// filesystem holding name, instead of an fsync per file. Linux reports a
// writeback error to syncfs only since 5.8; on an older kernel a failed
// writeback would look like success, so SyncFS refuses there
// (errors.ErrUnsupported) and callers sync file by file.
func (OS) SyncFS(name string) (err error) {
	if !syncfsReportsErrors() {
		return fmt.Errorf("faultfs: syncfs on this kernel does not report writeback errors (Linux 5.8 or later does): %w", errors.ErrUnsupported)
	}
	f, err := os.Open(name)
	if err != nil {
		return fmt.Errorf("faultfs: open for syncfs: %w", err)
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("faultfs: close after syncfs: %w", cerr)
		}
	}()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return &os.PathError{Op: "syncfs", Path: name, Err: err}
	}
	return nil
}

// syncfsReportsErrors reports whether the running kernel is Linux 5.8 or
// later. It asks uname each time: a microsecond beside the flush it
// guards, and no state to keep.
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
