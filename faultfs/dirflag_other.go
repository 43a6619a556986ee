//go:build !unix

package faultfs

// dirOpenFlag is 0 where O_DIRECTORY does not exist.
const dirOpenFlag = 0

// O_NOFOLLOW is 0 where the platform has no such flag.
const O_NOFOLLOW = 0
