//go:build unix

package faultfs

import "syscall"

// dirOpenFlag makes SyncDir fail with ENOTDIR on a non-directory.
const dirOpenFlag = syscall.O_DIRECTORY

// O_NOFOLLOW makes OpenFile fail with ELOOP when the last component of the
// path is a symbolic link, instead of following it. OS and Mem honour it.
const O_NOFOLLOW = syscall.O_NOFOLLOW
