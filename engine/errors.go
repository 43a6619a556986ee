package engine

import (
	"errors"
	"fmt"
)

// The engine's errors: one set of conditions, which callers test with
// errors.Is. The engine refuses with failf, which carries a condition and
// the text a user reads; the RPC edge (toRPCError in daemon/rpc.go) maps
// the conditions to the wire codes of SPEC 8.1, once. A tool-level
// failure is not an error but a result ({"error": ...}): the tools turn
// errInboxFull and errNotFoundAgent into results (tools_messages.go).
var (
	// ErrNotFound: an agent or other named thing does not exist.
	ErrNotFound = errors.New("not found")
	// ErrInvalid: a request the core refuses as given (bad value,
	// unknown provider or model, missing or ambiguous reference).
	ErrInvalid = errors.New("invalid request")
	// ErrWrongState: the agent's state forbids the operation now
	// (mid-turn, terminated, damaged log, no running turn or wait).
	ErrWrongState = errors.New("wrong state")
	// ErrTokenRejected: a resume token is unknown, expired, consumed,
	// revoked or does not match the agent's wait.
	ErrTokenRejected = errors.New("token rejected")
	// ErrUnavailable: the daemon cannot do it now; trying again later may
	// work (the log refuses appends, the request ended first).
	ErrUnavailable = errors.New("unavailable")
	// ErrShuttingDown: the daemon is stopping (an ErrUnavailable).
	ErrShuttingDown = fmt.Errorf("%w: shutting down", ErrUnavailable)
	// ErrNoSlot: no provider slot became free in time (an ErrUnavailable).
	ErrNoSlot = fmt.Errorf("%w: no provider slot", ErrUnavailable)

	// errInboxFull: a recipient's inbox, or the daemon's pending
	// messages, is at a limit (config.Limits); an ErrUnavailable.
	errInboxFull = &domainError{Kind: ErrUnavailable, Err: errors.New("inbox full")}
	// errNotFoundAgent: no live agent by that id (gone, terminated or
	// damaged) to send to or act on; an ErrNotFound.
	errNotFoundAgent = &domainError{Kind: ErrNotFound, Err: errors.New("agent not found")}
)

// Why a running turn's context was cancelled (context.Cause): the daemon
// stopping interrupts the run (run.interrupted, shutdown; SPEC 9), the
// operator's agent.cancel cancels it (turn.cancelled).
var (
	errStopping       = errors.New("the daemon is stopping")
	errOperatorCancel = errors.New("cancelled by the operator")
)

// domainError is an error whose text is the user's message and whose
// chain holds the condition (Kind) and the cause (any %w operand of its
// text).
type domainError struct {
	Kind error
	Err  error
}

func (e *domainError) Error() string   { return e.Err.Error() }
func (e *domainError) Unwrap() []error { return []error{e.Kind, e.Err} }

// failf returns an error reading fmt.Errorf(format, args...) that matches
// kind (errors.Is) and wraps any %w operand.
func failf(kind error, format string, args ...any) error {
	return &domainError{Kind: kind, Err: fmt.Errorf(format, args...)}
}
