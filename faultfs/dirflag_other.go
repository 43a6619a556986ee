//go:build !unix

package faultfs

// dirOpenFlag is 0 where O_DIRECTORY does not exist.
const dirOpenFlag = 0
