package protocol

import (
	"errors"
	"fmt"
)

// Code is a stable, transport-neutral error class. The HTTP layer maps each
// code to one status in a single table.
type Code int

// Error codes, in the order a request meets them.
const (
	CodeInvalid       Code = iota + 1 // malformed or invalid input (400)
	CodeNotFound                      // the named thing does not exist (404)
	CodeConflict                      // the request conflicts with current state (409)
	CodeUnprocessable                 // well-formed but impossible against server state (422)
	CodeTooLarge                      // request body over the size limit (413)
	CodeUnavailable                   // shutting down, storage unavailable, server busy (503)
	CodeForbidden                     // refused by policy, e.g. a cross-origin write (403)
)

// Error is a domain error with a stable code and the human text that the API
// returns in its {"error": ...} body.
type Error struct {
	Code    Code
	Message string
}

func (e *Error) Error() string { return e.Message }

// Errorf builds an *Error with a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Invalid is shorthand for a CodeInvalid error.
func Invalid(format string, args ...any) *Error { return Errorf(CodeInvalid, format, args...) }

// Unprocessable is shorthand for a CodeUnprocessable error.
func Unprocessable(format string, args ...any) *Error {
	return Errorf(CodeUnprocessable, format, args...)
}

// Prefixed returns err with its message prefixed (used for "jobs[3]: ..."),
// keeping its code; other errors are returned unchanged.
func Prefixed(prefix string, err error) error {
	var pe *Error
	if errors.As(err, &pe) {
		return &Error{Code: pe.Code, Message: prefix + pe.Message}
	}
	return err
}

// Sentinel domain errors shared by several endpoints.
var (
	// ErrJobNotFound is GET/DELETE/PATCH of an unknown job.
	ErrJobNotFound = &Error{Code: CodeNotFound, Message: "job not found"}
	// ErrNotInFlight answers an ack or failure for a job that is not in flight.
	ErrNotInFlight = &Error{Code: CodeNotFound, Message: "job not found in in-flight set"}
	// ErrShuttingDown answers requests that arrive while the server stops.
	ErrShuttingDown = &Error{Code: CodeUnavailable, Message: "server is shutting down"}
)

// StorageUnavailable is the 503 of a write the store refused (SPEC §1.5),
// naming the store's reason.
func StorageUnavailable(reason error) *Error {
	return Errorf(CodeUnavailable, "storage unavailable: %v", reason)
}
