package protocol

import (
	"net"
	"syscall"
)

// PeerCredentials returns the pid and uid of the process at the other end
// of c (SO_PEERCRED).
func PeerCredentials(c *net.UnixConn) (PeerCred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return PeerCred{PID: -1, UID: -1}, err
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return PeerCred{PID: -1, UID: -1}, err
	}
	if credErr != nil {
		return PeerCred{PID: -1, UID: -1}, credErr
	}
	return PeerCred{PID: int(cred.Pid), UID: int(cred.Uid)}, nil
}
