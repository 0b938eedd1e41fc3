package spent

import (
	"errors"
	"fmt"
)

// Error codes. They are stable: the HTTP server maps each to one status and
// the Go client maps the status and code back to the same *Error.
const (
	// EInvalid: malformed input (bad hex, base64, time, sizes).
	EInvalid = "invalid"
	// EUnknownNamespace: the namespace is not configured.
	EUnknownNamespace = "unknown_namespace"
	// EKeyTooLong: the key is longer than MaxKeyLen bytes.
	EKeyTooLong = "key_too_long"
	// EExpiryTooLong: a claim's expires_at lies further from now than its
	// namespace's max_expiry ([Policy.ExpiryLimit]): the ledger will not
	// promise to remember the key that long.
	EExpiryTooLong = "expiry_too_long"
	// ETooLarge: a body, result or batch over its limit.
	ETooLarge = "too_large"
	// ENotFound: no live record for the key.
	ENotFound = "not_found"
	// ENotPending: the record is already complete.
	ENotPending = "not_pending"
	// ESeqMismatch: the record was written by another claim than the seq given.
	ESeqMismatch = "seq_mismatch"
	// ELeaseExpired: completing or releasing without a seq after the lease ran
	// out; the record is an unknown outcome for an operator to resolve.
	ELeaseExpired = "lease_expired"
	// EUnauthorized: no or unknown credentials.
	EUnauthorized = "unauthorized"
	// EForbidden: credentials without the needed scope.
	EForbidden = "forbidden"
	// EUnavailable: the store could not be written or read, or the server
	// has no room for the request now; retry. Never a fresh claim.
	EUnavailable = "unavailable"
	// EHostNotAllowed: the request's Host is not a loopback name or address
	// while authentication is off (a web page reaching a loopback server
	// through DNS rebinding sends its own name).
	EHostNotAllowed = "host_not_allowed"
	// EInternal: a bug.
	EInternal = "internal"
)

// Error is a domain error with a stable code.
type Error struct {
	Code    string
	Message string
	Err     error // the cause, if any
}

// Error returns the message with its code.
func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("spent: %s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("spent: %s: %s", e.Code, e.Message)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with the given code.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the *Error in err's chain, EInternal for any
// other non-nil error, and "" for nil.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EInternal
}

// Technical errors returned by stores.
var (
	// ErrNotFound is returned by a store when no live record exists for a key.
	ErrNotFound = errors.New("spent: not found")
	// ErrNotPending is returned by Store.Complete and Store.Release when the
	// record is complete.
	ErrNotPending = errors.New("spent: record is not pending")
	// ErrSeqMismatch is returned by Store.Complete and Store.Release when the
	// live record carries another seq than the one given.
	ErrSeqMismatch = errors.New("spent: seq mismatch")
	// ErrClosed is returned by a store after Close.
	ErrClosed = errors.New("spent: store closed")
	// ErrSeqBehind is returned by a Ledger, wrapped in an unavailable
	// [Error], once its store has handed out a block of seq counters below
	// one the ledger already used: the store lost acknowledged writes (a
	// failover to a replica that was behind, or a restore from a backup).
	// The ledger then refuses every claim until it is made again.
	ErrSeqBehind = errors.New("spent: the store's seq counter went back")
)
