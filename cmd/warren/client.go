package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/warren-dev/warren/protocol"
)

func socketPath(home string) string { return filepath.Join(home, "daemon.sock") }

// notRunning is the exit-3 error for a missing socket, or (stale) a
// socket nobody listens on. The hint repeats --home when it was given.
func (c *cli) notRunning(stale bool) error {
	why := "no socket at " + socketPath(c.home)
	if stale {
		why = "stale socket at " + socketPath(c.home) + ": nobody listens on it, the daemon that made it is gone; daemon start replaces it"
	}
	hint := "warren daemon start"
	if c.homeFlag != "" {
		hint += " --home " + shellQuote(c.home)
	}
	return &exitError{
		code: exitNotRunning,
		msg:  fmt.Sprintf("daemon not running (%s); start it with: %s", why, hint),
	}
}

// isNotRunning reports whether a dial error means nobody listens on the
// socket.
func isNotRunning(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOENT) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOTSOCK)
}

// permissionDenied is the error for a home or socket the user may not use:
// that is not "not running", and retrying as is will not help.
func permissionDenied(home string, err error) error {
	return &exitError{
		code: exitDaemonErr,
		err:  err,
		msg: fmt.Sprintf("permission denied: cannot reach the daemon socket %s (%v); the home belongs to another user or "+
			"is not accessible to you: run warren as the home's owner, or use a home of your own with --home or WARREN_HOME",
			socketPath(home), err),
	}
}

// dial connects to the daemon of c.home. It talks only to a socket (never
// through a symbolic link or to another kind of file) served by the user's
// own uid (protocol.Dial checks SO_PEERCRED before sending anything).
func (c *cli) dial(ctx context.Context) (*protocol.Client, error) {
	sock := socketPath(c.home)
	st, err := os.Lstat(sock)
	switch {
	case errors.Is(err, fs.ErrPermission):
		return nil, permissionDenied(c.home, err)
	case err != nil:
		return nil, c.notRunning(false)
	case st.Mode()&fs.ModeSocket == 0:
		return nil, &exitError{code: exitDaemonErr, msg: fmt.Sprintf(
			"%s is not a socket (%s); warren talks only to the socket its daemon creates there. "+
				"Look at it and move it away; then start the daemon: warren daemon start", sock, fileKind(st))}
	}
	cl, err := protocol.Dial(ctx, sock)
	if err != nil {
		switch {
		case errors.Is(err, protocol.ErrUntrustedServer):
			return nil, &exitError{code: exitDaemonErr, err: err, msg: "refusing to talk to the daemon: " + err.Error()}
		case errors.Is(err, fs.ErrPermission):
			return nil, permissionDenied(c.home, err)
		case isNotRunning(err):
			return nil, c.notRunning(errors.Is(err, syscall.ECONNREFUSED))
		}
		return nil, fmt.Errorf("connect to the daemon at %s: %w", sock, err)
	}
	return cl, nil
}

// fileKind names the type of file st describes.
func fileKind(st fs.FileInfo) string {
	switch {
	case st.Mode()&fs.ModeSymlink != 0:
		return "a symbolic link"
	case st.IsDir():
		return "a directory"
	case st.Mode().IsRegular():
		return "a regular file"
	}
	return "a " + st.Mode().Type().String() + " file"
}

// call makes one RPC on a fresh connection.
func (c *cli) call(ctx context.Context, method string, params map[string]any) (map[string]any, error) {
	cl, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	res, err := cl.Call(ctx, method, params)
	if err != nil {
		return nil, &callError{method: method, err: err}
	}
	return res, nil
}

// callError is a failed RPC: it prints as the user-facing message and keeps
// the cause for errors.Is/As.
type callError struct {
	method string
	err    error
}

func (e *callError) Error() string { return rpcErr(e.method, e.err).Error() }
func (e *callError) Unwrap() error { return e.err }

// rpcErr turns a daemon error into the message the user sees.
func rpcErr(method string, err error) error {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return &exitError{code: exitDaemonErr, msg: pe.Message}
	}
	if errors.Is(err, context.Canceled) {
		return &exitError{code: exitDaemonErr, msg: "interrupted"}
	}
	if errors.Is(err, protocol.ErrClientClosed) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return &exitError{code: exitDaemonErr, msg: fmt.Sprintf("%s: the daemon closed the connection before answering (%v); check that it still runs: warren daemon status", method, err)}
	}
	return fmt.Errorf("%s: %w", method, err)
}

// callOut makes one RPC and, with --json, prints its result; it returns the
// result and whether the caller should print its own rendering.
func (c *cli) callOut(ctx context.Context, method string, params map[string]any) (map[string]any, bool, error) {
	res, err := c.call(ctx, method, params)
	if err != nil {
		return nil, false, err
	}
	if c.json {
		return res, false, printJSON(c.stdout, res)
	}
	return res, true, nil
}

// daemonStopped returns the exit-3 error saying the daemon stopped when
// nobody serves the socket of c.home any more, else nil. The daemon removes
// its socket before it ends the requests and streams in flight, so a
// client whose stream ended because the daemon stopped finds it gone.
func (c *cli) daemonStopped(ctx context.Context) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	cl, err := c.dial(dctx)
	if err == nil {
		_ = cl.Close()
		return nil
	}
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitNotRunning {
		return nil
	}
	return &exitError{code: exitNotRunning, err: err,
		msg: "the daemon stopped; start it again with: warren daemon start" + c.homeArg()}
}

// lostDaemon is the error for a request that failed while the user did not
// interrupt it: exit 3 with the daemon's word when the daemon has stopped,
// else the request's own error (a dial error is returned as it is).
func (c *cli) lostDaemon(ctx context.Context, err error) error {
	var ce *callError
	if !errors.As(err, &ce) {
		return err
	}
	if stopped := c.daemonStopped(ctx); stopped != nil {
		ee := stopped.(*exitError)
		ee.msg = ce.Error() + "; " + ee.msg
		return ee
	}
	return err
}
