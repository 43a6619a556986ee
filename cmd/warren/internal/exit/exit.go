// Package exit holds what a warren command ends with: the exit statuses of
// SPEC 8.2 and the error that carries one, with the message printed for it
// on stderr (`error: <message>`, then the usage line for a usage error).
package exit

import (
	"errors"
	"fmt"
)

// Exit statuses (SPEC 8.2).
const (
	OK         = 0
	DaemonErr  = 1 // the daemon, or an offline operation, returned an error
	Usage      = 2 // a usage error
	NotRunning = 3 // the daemon is not running, or stopped during a stream
	// Signal + the signal's number is the status of a command a signal
	// interrupted (130 for Ctrl-C), as shells report it.
	Signal = 128
)

// Error carries an exit status and the message printed for it.
type Error struct {
	Code  int
	Msg   string
	Usage string // usage line printed after a usage error
	Err   error  // the cause, for errors.Is/As (may be nil)
}

func (e *Error) Error() string { return e.Msg }
func (e *Error) Unwrap() error { return e.Err }

// Usagef is a usage error (status Usage) followed by the usage line usage.
func Usagef(usage, format string, args ...any) error {
	return &Error{Code: Usage, Msg: fmt.Sprintf(format, args...), Usage: usage}
}

// Failf is an error with status DaemonErr and the message format says.
func Failf(format string, args ...any) error {
	return &Error{Code: DaemonErr, Msg: fmt.Sprintf(format, args...)}
}

// ErrSilent ends a command with status DaemonErr when the command has
// already printed why.
var ErrSilent = errors.New("failed")
