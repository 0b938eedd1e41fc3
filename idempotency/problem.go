package idempotency

import (
	"net/http"
	"time"

	"github.com/spentledger/spent/internal/problem"
)

// ProblemType is the prefix of the "type" member of the middleware's problem
// documents; the code follows it. It points at the code table in
// docs/idempotency.md.
const ProblemType = "https://github.com/spentledger/spent/blob/main/docs/idempotency.md#code-"

// Problem codes. They are stable: clients may branch on the "code" member of
// a problem document (RFC 9457, application/problem+json) answered by the
// middleware. Codes shared with the ledger's HTTP API (too_large,
// unauthorized, unavailable, internal, mismatch, in_progress) mean the same
// there.
const (
	// CodeKeyMissing (400): the route requires an Idempotency-Key header and
	// the request has none. Final: add a key.
	CodeKeyMissing = "idempotency_key_missing"
	// CodeKeyInvalid (400): the header is malformed, repeated, or the key is
	// outside the published character set or longer than MaxKeyLen. Final.
	CodeKeyInvalid = "idempotency_key_invalid"
	// CodeBodyInvalid (400): the request body could not be read. Final.
	CodeBodyInvalid = "invalid"
	// CodeUnauthorized (401): the scope function found no client to scope
	// the key to. Final until credentials are sent.
	CodeUnauthorized = "unauthorized"
	// CodeTooLarge (413): the request body is over the limit. Final.
	CodeTooLarge = "too_large"
	// CodeMismatch (422): the key was already used for another request
	// (another method, path, chosen header or body). Final: use a new key
	// for a new request.
	CodeMismatch = "mismatch"
	// CodeInProgress (409, with Retry-After): a request with this key is
	// still running, or was interrupted after it applied its effect and has
	// not been listed as an unknown outcome yet. Retry with the same key.
	CodeInProgress = "in_progress"
	// CodeOutcomeUnknown (409, no Retry-After): a request with this key was
	// interrupted after it applied its effect and before its answer was
	// stored. Its outcome is unknown until an operator resolves it (spent
	// unknown list / resolve); retrying before then changes nothing.
	CodeOutcomeUnknown = "outcome_unknown"
	// CodeUnavailable (503, with Retry-After): the ledger could not be
	// written or read. Retry with the same key.
	CodeUnavailable = "unavailable"
	// CodeInternal (500): a misconfiguration or a bug (an unusable scope, a
	// namespace with the wrong policy, a response too large to store).
	CodeInternal = "internal"
)

var problemTitles = map[string]string{
	CodeKeyMissing:     "Idempotency-Key required",
	CodeKeyInvalid:     "Malformed Idempotency-Key",
	CodeBodyInvalid:    "Invalid request",
	CodeUnauthorized:   "Unauthorized",
	CodeTooLarge:       "Request body too large",
	CodeMismatch:       "Idempotency-Key reused with another request",
	CodeInProgress:     "Request in progress",
	CodeOutcomeUnknown: "Outcome unknown",
	CodeUnavailable:    "Ledger unavailable",
	CodeInternal:       "Internal error",
}

var (
	hdrTrue = []string{"true"}
)

// writeProblem answers an RFC 9457 problem document with code, and a
// Retry-After header when retryAfter is positive.
func (m *Middleware) writeProblem(w http.ResponseWriter, status int, code, detail string, retryAfter time.Duration) {
	h := w.Header()
	h[HeaderRetention] = m.retention
	if retryAfter > 0 {
		h["Retry-After"] = []string{problem.RetryAfter(retryAfter)}
	}
	problem.Write(w, status, problem.Append(nil, ProblemType, code, problemTitles[code], status, detail))
}
