//go:build !linux

package server

import (
	"errors"
	"net"
)

// peerUID is only implemented on Linux (SO_PEERCRED); elsewhere every peer
// is refused, which is the safe default.
func peerUID(c *net.UnixConn) (int, error) {
	return -1, errors.New("peer credentials are not supported on this platform (SO_PEERCRED is Linux-only)")
}
