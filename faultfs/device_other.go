//go:build !unix

package faultfs

import "io/fs"

// Device is 0 here: one filesystem is assumed, and OpenFS is unsupported
// anyway, so callers sync file by file.
func Device(fs.FileInfo) uint64 { return 0 }
