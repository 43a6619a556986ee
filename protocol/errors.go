package protocol

import (
	"errors"
	"fmt"
)

// Error codes carried in error frames (SPEC 8.1).
const (
	// CodeNotFound: an agent, run or other named thing does not exist.
	CodeNotFound = 1
	// CodeInvalid: bad or missing params, wrong state, routing violation,
	// malformed request.
	CodeInvalid = 2
	// CodeInternal: anything else; the daemon's fault, not the caller's.
	CodeInternal = 3
	// CodeUnknownMethod: the method name is not served.
	CodeUnknownMethod = 4
	// CodeTokenRejected: a resume token is expired, consumed, revoked or
	// does not match.
	CodeTokenRejected = 5
	// CodeUnavailable: recovering, shutting down, connection limit reached,
	// no slot in time. Retrying later may succeed.
	CodeUnavailable = 6
)

// Error is an error carried over the wire: a code and a human-readable
// message. Handlers return it to choose the code the client sees; the client
// returns it for every error frame the daemon sends.
type Error struct {
	Code    int    `json:"code" msgpack:"code"`
	Message string `json:"message" msgpack:"message"`
}

// Error returns the message (the code is in e.Code; see CodeName).
func (e *Error) Error() string {
	if e == nil {
		return "<nil protocol error>"
	}
	return e.Message
}

// Errorf builds an *Error with a formatted message.
func Errorf(code int, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// CodeOf returns the code of the first *Error in err's chain, CodeInternal
// for any other non-nil error, and 0 for nil.
func CodeOf(err error) int {
	if err == nil {
		return 0
	}
	var pe *Error
	if errors.As(err, &pe) && pe != nil {
		return pe.Code
	}
	return CodeInternal
}

// IsCode reports whether err carries a protocol error with the given code.
// Kept for tests (the socket tests check wire codes with it).
func IsCode(err error, code int) bool {
	var pe *Error
	return errors.As(err, &pe) && pe != nil && pe.Code == code
}

// AsError converts any error to the *Error sent on the wire: the first
// *Error in the chain, else CodeInternal with err's text.
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var pe *Error
	if errors.As(err, &pe) && pe != nil {
		return pe
	}
	return &Error{Code: CodeInternal, Message: err.Error()}
}

// CodeName returns a short name for a code ("not_found", "invalid", ...),
// or "code_N" for an unknown one.
func CodeName(code int) string {
	switch code {
	case CodeNotFound:
		return "not_found"
	case CodeInvalid:
		return "invalid"
	case CodeInternal:
		return "internal"
	case CodeUnknownMethod:
		return "unknown_method"
	case CodeTokenRejected:
		return "token_rejected"
	case CodeUnavailable:
		return "unavailable"
	}
	return fmt.Sprintf("code_%d", code)
}
