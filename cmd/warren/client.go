package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/warren-dev/warren/protocol"
)

func socketPath(home string) string { return filepath.Join(home, "daemon.sock") }

// notRunning is the exit-3 error for a missing or refusing socket.
func notRunning(home string) error {
	return &exitError{
		code: exitNotRunning,
		msg:  fmt.Sprintf("daemon not running (no socket at %s); start it with: warren daemon start", socketPath(home)),
	}
}

// isNotRunning reports whether a dial error means nobody listens on the
// socket.
func isNotRunning(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOENT) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOTSOCK)
}

// dial connects to the daemon of c.home.
func (c *cli) dial(ctx context.Context) (*protocol.Client, error) {
	sock := socketPath(c.home)
	if _, err := os.Stat(sock); err != nil {
		return nil, notRunning(c.home)
	}
	cl, err := protocol.Dial(ctx, sock)
	if err != nil {
		if isNotRunning(err) {
			return nil, notRunning(c.home)
		}
		return nil, fmt.Errorf("connect to the daemon at %s: %w", sock, err)
	}
	return cl, nil
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
