//go:build unix

package faultfs

import "syscall"

// dirOpenFlag makes SyncDir fail with ENOTDIR on a non-directory.
const dirOpenFlag = syscall.O_DIRECTORY
