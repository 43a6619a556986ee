package protocol

import (
	"errors"
	"fmt"
	"net"
	"os"
)

// ErrUntrustedServer is returned (wrapped) by Dial, CallJSON and StreamJSON
// when the process serving the socket does not run as this process's
// effective uid: whoever controls the socket path could read every request
// and forge every reply, so nothing is sent.
var ErrUntrustedServer = errors.New("the daemon socket is served by another user")

// PeerCred is the identity of the process at the other end of a Unix
// socket connection, as the kernel recorded it (SO_PEERCRED): for a client,
// the process that created the listening socket.
type PeerCred struct {
	PID int
	UID int
}

// CheckServer verifies, before anything is sent, that the process serving
// conn runs as this process's effective uid. It returns an error wrapping
// ErrUntrustedServer (or the credential lookup's error) otherwise.
func CheckServer(conn net.Conn, socketPath string) error {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return fmt.Errorf("%w: %s is not a Unix socket connection", ErrUntrustedServer, socketPath)
	}
	cred, err := PeerCredentials(uc)
	if err != nil {
		return fmt.Errorf("%w: cannot read the credentials of the process serving %s (%v); nothing was sent",
			ErrUntrustedServer, socketPath, err)
	}
	if own := os.Geteuid(); cred.UID != own {
		return fmt.Errorf("%w: %s is served by uid %d (pid %d), not by your uid %d; nothing was sent. "+
			"Another user controls this socket or its directory: check who owns the home directory and use a home only you can write",
			ErrUntrustedServer, socketPath, cred.UID, cred.PID, own)
	}
	return nil
}
