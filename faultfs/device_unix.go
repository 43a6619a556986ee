//go:build unix

package faultfs

import (
	"io/fs"
	"syscall"
)

// Device is the id of the filesystem holding the file fi describes, or 0
// when fi does not say (a Mem's files: a Mem is one filesystem).
func Device(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev) //nolint:unconvert // Dev is int32 on some platforms
	}
	return 0
}
