//go:build !linux

package protocol

import (
	"errors"
	"net"
)

// PeerCredentials is only implemented on Linux (SO_PEERCRED); elsewhere it
// fails, so clients and servers refuse every peer, the safe default.
func PeerCredentials(c *net.UnixConn) (PeerCred, error) {
	return PeerCred{PID: -1, UID: -1}, errors.New("peer credentials are not supported on this platform (SO_PEERCRED is Linux-only)")
}
