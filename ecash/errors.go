package ecash

import (
	"fmt"
	"net/http"
)

// Error codes of the issuer, in problem+json documents. Final codes mean
// that resending the same request can never succeed; the wallet clears its
// journal entry for them.
const (
	// CodeDoubleSpend (409, final): the input token was spent by another
	// request (another digest under the same nullifier).
	CodeDoubleSpend = "double_spend"
	// CodeChallengeMismatch (409, final): the challenge was consumed by
	// another request.
	CodeChallengeMismatch = "challenge_mismatch"
	// CodeChallengeGone (410, final): the challenge is unknown (not this
	// issuer's) or expired, and no request consumed it that could be
	// replayed.
	CodeChallengeGone = "challenge_gone"
	// CodeProofInvalid (403, final): the input token's signature, its key's
	// window, or the proof of work does not verify. No state was touched:
	// the token is not spent, the challenge not consumed.
	CodeProofInvalid = "proof_invalid"
	// CodeBadRequest (400, final): the request is malformed, names an
	// unknown or wrong output key, or asks for more than the input is
	// worth. No state was touched.
	CodeBadRequest = "bad_request"
	// CodeUnavailable (503, retryable): the ledger could not be written or
	// read; whether the request was recorded is unknown, so resend the
	// same bytes.
	CodeUnavailable = "unavailable"
	// CodeInternal (500, retryable): a bug or a computation fault.
	CodeInternal = "internal"
)

// ProblemType is the prefix of the "type" member of the problem documents
// the issuer writes; the code follows it.
const ProblemType = "https://github.com/spentledger/spent/blob/main/docs/ecash.md#code-"

// Error is a refusal by the issuer, and the error type of the client for
// answers that carry a problem document.
type Error struct {
	// Code is one of the Code* constants.
	Code string `json:"code"`
	// Status is the HTTP status.
	Status int `json:"status"`
	// Title is the code's short description.
	Title string `json:"title"`
	// Type is ProblemType + Code.
	Type string `json:"type"`
	// Detail says what was wrong.
	Detail string `json:"detail"`
	// Err is the cause, if any; not on the wire.
	Err error `json:"-"`
}

// Error returns the code and the detail.
func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("ecash: %s: %s: %v", e.Code, e.Detail, e.Err)
	}
	return fmt.Sprintf("ecash: %s: %s", e.Code, e.Detail)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Final reports whether the same request can never succeed: true for every
// 4xx code, false for 5xx (resend the same bytes later).
func (e *Error) Final() bool { return e.Status >= 400 && e.Status < 500 }

// Untouched reports whether the issuer provably touched no state: true for
// proof_invalid and bad_request, after which a wallet may spend the input
// token again.
func (e *Error) Untouched() bool { return e.Code == CodeProofInvalid || e.Code == CodeBadRequest }

var codes = map[string]struct {
	status int
	title  string
}{
	CodeDoubleSpend:       {http.StatusConflict, "Double spend"},
	CodeChallengeMismatch: {http.StatusConflict, "Challenge mismatch"},
	CodeChallengeGone:     {http.StatusGone, "Challenge gone"},
	CodeProofInvalid:      {http.StatusForbidden, "Proof invalid"},
	CodeBadRequest:        {http.StatusBadRequest, "Bad request"},
	CodeUnavailable:       {http.StatusServiceUnavailable, "Unavailable"},
	CodeInternal:          {http.StatusInternalServerError, "Internal error"},
}

func errorf(code string, cause error, format string, args ...any) *Error {
	c := codes[code]
	return &Error{Code: code, Status: c.status, Title: c.title, Type: ProblemType + code, Detail: fmt.Sprintf(format, args...), Err: cause}
}
