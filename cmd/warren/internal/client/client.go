// Package client is the command line's connection to the daemon of a
// home: it talks only to the socket <home>/daemon.sock (never through a
// symbolic link or to another kind of file) served by the user's own uid
// (protocol.Dial checks SO_PEERCRED before sending anything), and turns
// what goes wrong into the errors the user sees, with their exit status
// (package exit): not running (3) with the command that starts the
// daemon, permission denied, an untrusted server, a daemon that stopped
// during a request or a stream.
package client

import (
	"context"
	"errors"
	"fmt"
	"github.com/warren-dev/warren/homedir"
	"io/fs"
	"os"
	"syscall"
	"time"

	"github.com/warren-dev/warren/cmd/warren/internal/exit"
	"github.com/warren-dev/warren/cmd/warren/internal/render"
	"github.com/warren-dev/warren/protocol"
)

// Client reaches the daemon of one home.
type Client struct {
	home      string
	homeGiven bool // --home was given: hints repeat it
}

// New is the client of the daemon of home; homeGiven says the user named
// the home with --home, so that the commands printed as hints repeat it.
func New(home string, homeGiven bool) *Client {
	return &Client{home: home, homeGiven: homeGiven}
}

// HomeArg is " --home H" when --home was given, else "": the printed
// commands carry it.
func (c *Client) HomeArg() string {
	if !c.homeGiven {
		return ""
	}
	return " --home " + render.ShellQuote(c.home)
}

// notRunning is the exit-3 error for a missing socket, or (stale) a
// socket nobody listens on. The hint repeats --home when it was given.
func (c *Client) notRunning(stale bool) error {
	why := "no socket at " + homedir.SocketPath(c.home)
	if stale {
		why = "stale socket at " + homedir.SocketPath(c.home) + ": nobody listens on it, the daemon that made it is gone; daemon start replaces it"
	}
	return &exit.Error{
		Code: exit.NotRunning,
		Msg:  fmt.Sprintf("daemon not running (%s); start it with: warren daemon start%s", why, c.HomeArg()),
	}
}

// IsNotRunning reports whether a dial error means nobody listens on the
// socket.
func IsNotRunning(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOENT) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOTSOCK)
}

// permissionDenied is the error for a home or socket the user may not use:
// that is not "not running", and retrying as is will not help.
func permissionDenied(home string, err error) error {
	return &exit.Error{
		Code: exit.DaemonErr,
		Err:  err,
		Msg: fmt.Sprintf("permission denied: cannot reach the daemon socket %s (%v); the home belongs to another user or "+
			"is not accessible to you: run warren as the home's owner, or use a home of your own with --home or WARREN_HOME",
			homedir.SocketPath(home), err),
	}
}

// Dial connects to the daemon of the home.
func (c *Client) Dial(ctx context.Context) (*protocol.Client, error) {
	sock := homedir.SocketPath(c.home)
	st, err := os.Lstat(sock)
	switch {
	case errors.Is(err, fs.ErrPermission):
		return nil, permissionDenied(c.home, err)
	case err != nil:
		return nil, c.notRunning(false)
	case st.Mode()&fs.ModeSocket == 0:
		return nil, exit.Failf(
			"%s is not a socket (%s); warren talks only to the socket its daemon creates there. "+
				"Look at it and move it away; then start the daemon: warren daemon start", sock, FileKind(st))
	}
	cl, err := protocol.Dial(ctx, sock)
	if err != nil {
		switch {
		case errors.Is(err, protocol.ErrUntrustedServer):
			return nil, &exit.Error{Code: exit.DaemonErr, Err: err, Msg: "refusing to talk to the daemon: " + err.Error()}
		case errors.Is(err, fs.ErrPermission):
			return nil, permissionDenied(c.home, err)
		case IsNotRunning(err):
			return nil, c.notRunning(errors.Is(err, syscall.ECONNREFUSED))
		}
		return nil, fmt.Errorf("connect to the daemon at %s: %w", sock, err)
	}
	return cl, nil
}

// FileKind names the type of file st describes.
func FileKind(st fs.FileInfo) string {
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

// Call makes one RPC on a fresh connection. A failed RPC is a *CallError.
func (c *Client) Call(ctx context.Context, method string, params map[string]any) (map[string]any, error) {
	cl, err := c.Dial(ctx)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	res, err := cl.Call(ctx, method, params)
	if err != nil {
		return nil, &CallError{Method: method, Err: err}
	}
	return res, nil
}

// CallError is a failed RPC: it prints as the user-facing message and keeps
// the cause for errors.Is/As.
type CallError struct {
	Method string
	Err    error
}

func (e *CallError) Error() string { return RPCError(e.Method, e.Err).Error() }
func (e *CallError) Unwrap() error { return e.Err }

// RPCError turns a daemon error into the message the user sees.
func RPCError(method string, err error) error {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return &exit.Error{Code: exit.DaemonErr, Msg: pe.Message}
	}
	if errors.Is(err, context.Canceled) {
		return &exit.Error{Code: exit.DaemonErr, Msg: "interrupted"}
	}
	if errors.Is(err, protocol.ErrClientClosed) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return exit.Failf("%s: the daemon closed the connection before answering (%v); check that it still runs: warren daemon status", method, err)
	}
	return fmt.Errorf("%s: %w", method, err)
}

// Refused reports whether err is the client refusing the socket (another
// user's server, a file that is not a socket, a permission problem)
// rather than no daemon or a daemon error: waiting would not change it.
func Refused(err error) bool {
	var ee *exit.Error
	return errors.As(err, &ee) && ee.Code != exit.NotRunning && !errors.As(err, new(*CallError))
}

// Stopped returns the exit-3 error saying the daemon stopped when nobody
// serves the socket of the home any more, else nil. The daemon removes
// its socket before it ends the requests and streams in flight, so a
// client whose stream ended because the daemon stopped finds it gone.
func (c *Client) Stopped(ctx context.Context) *exit.Error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	cl, err := c.Dial(dctx)
	if err == nil {
		_ = cl.Close()
		return nil
	}
	var ee *exit.Error
	if !errors.As(err, &ee) || ee.Code != exit.NotRunning {
		return nil
	}
	return &exit.Error{Code: exit.NotRunning, Err: err,
		Msg: "the daemon stopped; start it again with: warren daemon start" + c.HomeArg()}
}

// Lost is the error for a request that failed while the user did not
// interrupt it: exit 3 with the daemon's word when the daemon has
// stopped, else the request's own error (an error that is not a
// *CallError, such as a dial error, is returned as it is).
func (c *Client) Lost(ctx context.Context, err error) error {
	var ce *CallError
	if !errors.As(err, &ce) {
		return err
	}
	if stopped := c.Stopped(ctx); stopped != nil {
		stopped.Msg = ce.Error() + "; " + stopped.Msg
		return stopped
	}
	return err
}

// Caller makes one request of the daemon (a Client, or a dialed
// protocol.Client).
type Caller interface {
	Call(ctx context.Context, method string, params map[string]any) (map[string]any, error)
}

// ListAgents calls agent.list page after page (each reply's next passed
// back as after) and returns the reply of the whole list: {"agents": all}.
// params are agent.list's (status, all); the caller's map is not changed.
func ListAgents(ctx context.Context, c Caller, params map[string]any) (map[string]any, error) {
	var all []any
	p := map[string]any{}
	for k, v := range params {
		p[k] = v
	}
	for {
		res, err := c.Call(ctx, "agent.list", p)
		if err != nil {
			return nil, err
		}
		page, _ := res["agents"].([]any)
		all = append(all, page...)
		next, _ := res["next"].(string)
		if next == "" {
			return map[string]any{"agents": all}, nil
		}
		p["after"] = next
	}
}
