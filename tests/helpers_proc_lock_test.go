//go:build !warren_daemon_bugs

package tests

// waitLockAfterKill: Kill waits for daemon.lock to be free before it
// returns (see waitLockFree). The bug build (tag warren_daemon_bugs) sets
// it false to reproduce the spurious "already running" after a kill.
const waitLockAfterKill = true
