// Package faultfs is the filesystem interface every warren storage path uses,
// with two implementations: OS, the real filesystem with durable fsync and
// directory fsync, and Mem, a crashable in-memory filesystem with fault
// injection that the crash tests drive.
package faultfs
