package engine

import (
	"errors"
	"fmt"
)

// The core's domain errors. The core wraps them (failf) with the text a
// user reads; the RPC edge (wireError in rpc.go) maps them to the wire
// codes of SPEC 8.1, once. Callers test them with errors.Is.
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
)

// domainError is an error whose text is the user's message and whose
// chain holds the domain condition (kind) and the cause (any %w operand).
type domainError struct {
	kind error
	err  error
}

func (e *domainError) Error() string   { return e.err.Error() }
func (e *domainError) Unwrap() []error { return []error{e.kind, e.err} }

// failf returns an error reading fmt.Errorf(format, args...) that matches
// kind (errors.Is) and wraps any %w operand.
func failf(kind error, format string, args ...any) error {
	return &domainError{kind: kind, err: fmt.Errorf(format, args...)}
}
