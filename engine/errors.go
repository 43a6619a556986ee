package engine

import (
	"github.com/warren-dev/warren/engine/internal/domainerr"
)

// The core's domain errors (package domainerr). The core wraps them
// (failf) with the text a user reads; the RPC edge (wireError in rpc.go)
// maps them to the wire codes of SPEC 8.1, once. Callers test them with
// errors.Is.
var (
	// ErrNotFound: an agent or other named thing does not exist.
	ErrNotFound = domainerr.NotFound
	// ErrInvalid: a request the core refuses as given (bad value,
	// unknown provider or model, missing or ambiguous reference).
	ErrInvalid = domainerr.Invalid
	// ErrWrongState: the agent's state forbids the operation now
	// (mid-turn, terminated, damaged log, no running turn or wait).
	ErrWrongState = domainerr.WrongState
	// ErrTokenRejected: a resume token is unknown, expired, consumed,
	// revoked or does not match the agent's wait.
	ErrTokenRejected = domainerr.TokenRejected
	// ErrUnavailable: the daemon cannot do it now; trying again later may
	// work (the log refuses appends, the request ended first).
	ErrUnavailable = domainerr.Unavailable
	// ErrShuttingDown: the daemon is stopping (an ErrUnavailable).
	ErrShuttingDown = domainerr.ShuttingDown
	// ErrNoSlot: no provider slot became free in time (an ErrUnavailable).
	ErrNoSlot = domainerr.NoSlot
)

// failf returns an error reading fmt.Errorf(format, args...) that matches
// kind (errors.Is) and wraps any %w operand.
func failf(kind error, format string, args ...any) error { return domainerr.New(kind, format, args...) }
