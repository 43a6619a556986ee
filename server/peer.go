package server

import (
	"net"

	"github.com/warren-dev/warren/protocol"
)

// peerUID returns the uid of the process at the other end of c
// (SO_PEERCRED).
func peerUID(c *net.UnixConn) (int, error) {
	cred, err := protocol.PeerCredentials(c)
	return cred.UID, err
}
