// Package domainerr holds the engine's domain errors: the conditions a
// caller tests with errors.Is (an agent not found, a request refused as
// given, the wrong state, a rejected token, the daemon unavailable), and
// the errors that carry one of them with the text a user reads. The
// engine re-exports the conditions (engine.ErrNotFound, ...); the RPC
// edge maps them to the wire codes of SPEC 8.1, once. The engine's
// internal packages that refuse in the user's words (agentrec) make their
// errors here, so no mapping sits between them and the edge.
//
// The package holds no state and takes no lock.
package domainerr

import (
	"errors"
	"fmt"
)

// The conditions.
var (
	// NotFound: an agent or other named thing does not exist.
	NotFound = errors.New("not found")
	// Invalid: a request refused as given (bad value, unknown provider or
	// model, missing or ambiguous reference).
	Invalid = errors.New("invalid request")
	// WrongState: the agent's state forbids the operation now (mid-turn,
	// terminated, damaged log, no running turn or wait).
	WrongState = errors.New("wrong state")
	// TokenRejected: a resume token is unknown, expired, consumed, revoked
	// or does not match the agent's wait.
	TokenRejected = errors.New("token rejected")
	// Unavailable: the daemon cannot do it now; trying again later may
	// work (the log refuses appends, the request ended first).
	Unavailable = errors.New("unavailable")
	// ShuttingDown: the daemon is stopping (an Unavailable).
	ShuttingDown = fmt.Errorf("%w: shutting down", Unavailable)
	// NoSlot: no provider slot became free in time (an Unavailable).
	NoSlot = fmt.Errorf("%w: no provider slot", Unavailable)
)

// Error is an error whose text is the user's message and whose chain
// holds the condition (Kind) and the cause (any %w operand of its text).
type Error struct {
	Kind error
	Err  error
}

func (e *Error) Error() string   { return e.Err.Error() }
func (e *Error) Unwrap() []error { return []error{e.Kind, e.Err} }

// New returns an error reading fmt.Errorf(format, args...) that matches
// kind (errors.Is) and wraps any %w operand.
func New(kind error, format string, args ...any) error {
	return &Error{Kind: kind, Err: fmt.Errorf(format, args...)}
}
