package server

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"

	"github.com/warren-dev/warren/protocol"
)

// ErrSocketInUse is returned (wrapped) by Listen when another process is
// accepting connections on the socket path.
var ErrSocketInUse = errors.New("socket is in use by another server")

// ErrNotSocket is returned (wrapped) by Listen when the socket path exists
// and is not a socket; Listen never removes it.
var ErrNotSocket = errors.New("path exists and is not a socket")

// listenUnix creates a Unix socket at path with mode 0600 regardless of the
// process umask. The socket is bound inside a fresh 0700 directory next to
// path, chmodded, then renamed into place, so no other user can ever connect
// to it. When that temporary path would exceed the platform limit, it binds
// path directly and chmods it (the home directory is 0700 anyway). A stale
// socket at path (nobody accepting) is replaced; a live one is
// ErrSocketInUse; any other file is ErrNotSocket. It returns the listener and
// the identity of the socket file, for removing it later only if it is still
// ours.
func listenUnix(path string) (*net.UnixListener, os.FileInfo, error) {
	if err := protocol.CheckSocketPath(path); err != nil {
		return nil, nil, err
	}
	stale := false
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, nil, fmt.Errorf("listen on %s: %w; move it away or choose another home", path, ErrNotSocket)
		}
		c, err := net.Dial("unix", path)
		if err == nil {
			c.Close()
			return nil, nil, fmt.Errorf("listen on %s: %w; stop the other daemon first", path, ErrSocketInUse)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return nil, nil, fmt.Errorf("listen on %s: probe existing socket: %w", path, err)
		}
		stale = true
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, nil, fmt.Errorf("listen on %s: %w", path, err)
	}

	dir := filepath.Dir(path)
	tmpDir, err := os.MkdirTemp(dir, ".sock")
	if err != nil {
		return nil, nil, fmt.Errorf("listen on %s: create private directory: %w", path, err)
	}
	defer os.RemoveAll(tmpDir)
	tmp := filepath.Join(tmpDir, "s")
	if len(tmp) > protocol.MaxSocketPath {
		return listenDirect(path, stale)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	ln.SetUnlinkOnClose(false)
	if err := os.Chmod(tmp, 0o600); err != nil {
		ln.Close()
		return nil, nil, fmt.Errorf("listen on %s: chmod 0600: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		ln.Close()
		return nil, nil, fmt.Errorf("listen on %s: move socket into place: %w", path, err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		ln.Close()
		return nil, nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	return ln, fi, nil
}

func listenDirect(path string, stale bool) (*net.UnixListener, os.FileInfo, error) {
	if stale {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, nil, fmt.Errorf("listen on %s: remove stale socket: %w", path, err)
		}
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	ln.SetUnlinkOnClose(false)
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		os.Remove(path)
		return nil, nil, fmt.Errorf("listen on %s: chmod 0600: %w", path, err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		ln.Close()
		return nil, nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	return ln, fi, nil
}

// removeIfOurs removes the socket file at path if it is still the one this
// server created.
func removeIfOurs(path string, ours os.FileInfo) {
	if ours == nil {
		return
	}
	if fi, err := os.Lstat(path); err == nil && os.SameFile(fi, ours) {
		os.Remove(path)
	}
}
