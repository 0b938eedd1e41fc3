package webhooks

import (
	"net/http"
	"time"

	"github.com/spentledger/spent/internal/problem"
)

// ProblemType is the prefix of the "type" member of the receiver's problem
// documents; the code follows it. It points at the code table in
// docs/webhooks.md.
const ProblemType = "https://github.com/spentledger/spent/blob/main/docs/webhooks.md#code-"

// Problem codes. They are stable: the "code" member of the RFC 9457 problem
// documents (application/problem+json) the receiver answers. A sender
// treats every non-2xx answer as a failed delivery and retries it later,
// with a new timestamp and signature; the codes tell an operator why.
// Codes shared with the ledger's HTTP API (too_large, unavailable,
// internal, in_progress) mean the same there.
const (
	// CodeHeadersMissing (401): webhook-id, webhook-timestamp or
	// webhook-signature is absent: the request is not a signed message.
	CodeHeadersMissing = "headers_missing"
	// CodeHeadersInvalid (400): a webhook header is repeated, over its
	// limit or malformed (see ParseHeaders).
	CodeHeadersInvalid = "headers_invalid"
	// CodeTimestamp (401): webhook-timestamp is further than the tolerance
	// from the receiver's clock: a replay, a delayed delivery, or a clock
	// that is off. Checked before the ledger is consulted.
	CodeTimestamp = "timestamp_out_of_tolerance"
	// CodeSignature (401): no signature verifies under the configured
	// secrets and public keys: a forged or altered message, or a secret
	// that is not (yet) configured.
	CodeSignature = "signature_invalid"
	// CodeMethod (405): the request is not a POST.
	CodeMethod = "method_not_allowed"
	// CodeBodyInvalid (400): the body could not be read.
	CodeBodyInvalid = "invalid"
	// CodeTooLarge (413): the body is over Options.MaxBody.
	CodeTooLarge = "too_large"
	// CodeInProgress (409, with Retry-After): a delivery of the same
	// message is being handled now. Retry.
	CodeInProgress = "in_progress"
	// CodeUnavailable (503, with Retry-After): the ledger could not be
	// written or read; the handler did not run. Retry.
	CodeUnavailable = "unavailable"
	// CodeInternal (500): a misconfiguration (a namespace with the wrong
	// policy) or a handler whose response is over Options.MaxResponse.
	CodeInternal = "internal"
)

var problemTitles = map[string]string{
	CodeHeadersMissing: "Webhook headers missing",
	CodeHeadersInvalid: "Malformed webhook headers",
	CodeTimestamp:      "Webhook timestamp outside the tolerance",
	CodeSignature:      "No valid webhook signature",
	CodeMethod:         "Method not allowed",
	CodeBodyInvalid:    "Invalid request",
	CodeTooLarge:       "Request body too large",
	CodeInProgress:     "Message in progress",
	CodeUnavailable:    "Ledger unavailable",
	CodeInternal:       "Internal error",
}

// writeProblem answers an RFC 9457 problem document with code, and a
// Retry-After header when retryAfter is positive.
func writeProblem(w http.ResponseWriter, status int, code, detail string, retryAfter time.Duration) {
	if retryAfter > 0 {
		w.Header()["Retry-After"] = []string{problem.RetryAfter(retryAfter)}
	}
	problem.Write(w, status, problem.Append(nil, ProblemType, code, problemTitles[code], status, detail))
}
