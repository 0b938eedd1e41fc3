package privacypass

import (
	"net/http"
	"strconv"

	"github.com/spentledger/spent/internal/problem"
)

// ProblemType is the prefix of the "type" member of the problem documents
// this package writes; the code follows it. It points at the table of
// codes in docs/privacypass.md.
const ProblemType = "https://github.com/spentledger/spent/blob/main/docs/privacypass.md#code-"

// Error codes of the issuer and the origin. They are stable: clients may
// branch on them. Codes marked final mean that retrying the same request
// cannot succeed; the others are retryable.
const (
	// CodeBadRequest (400, final): the request is malformed (method,
	// content type, body, or a token that does not parse).
	CodeBadRequest = "bad_request"
	// CodeUnauthorized (401, final): the issuer could not identify the
	// client (no or unknown attester credentials).
	CodeUnauthorized = "unauthorized"
	// CodeTokenType (422 at the issuer, 401 at an origin; final): a token
	// type that is not served.
	CodeTokenType = "unsupported_token_type"
	// CodeUnknownKey (422 at the issuer, 401 at an origin; final): no
	// usable key has that key id (at the issuer: truncated key id).
	CodeUnknownKey = "unknown_key"
	// CodeWrongSize (422, final): a token request whose size does not match
	// its type, or whose blinded message is out of range.
	CodeWrongSize = "wrong_size"
	// CodeQuota (429): the client used its tokens for this epoch; retry
	// after the Retry-After header (the next epoch).
	CodeQuota = "quota_exceeded"
	// CodeTokenRequired (401): no PrivateToken credential was presented;
	// the WWW-Authenticate header carries challenges.
	CodeTokenRequired = "token_required"
	// CodeKeyExpired (401, final): the token's key is past its epoch and
	// grace (or not yet in its epoch); refused before the ledger is
	// consulted.
	CodeKeyExpired = "key_expired"
	// CodeChallengeMismatch (401, final): the token answers no challenge
	// this origin issued.
	CodeChallengeMismatch = "challenge_mismatch"
	// CodeChallengeGone (401, final): the token answers a challenge this
	// origin issued, but it expired.
	CodeChallengeGone = "challenge_gone"
	// CodeProofInvalid (401, final): the token's authenticator does not
	// verify.
	CodeProofInvalid = "proof_invalid"
	// CodeDoubleSpend (401, final): the token was spent before, here or at
	// any origin sharing the ledger.
	CodeDoubleSpend = "double_spend"
	// CodeUnavailable (503): the ledger could not be written or read, or no
	// key is ready; retry. A token refused so is not spent.
	CodeUnavailable = "unavailable"
	// CodeInternal (500): a bug or a computation fault.
	CodeInternal = "internal"
)

var codeTitles = map[string]string{
	CodeBadRequest:        "Bad request",
	CodeUnauthorized:      "Unauthorized",
	CodeTokenType:         "Unsupported token type",
	CodeUnknownKey:        "Unknown key",
	CodeWrongSize:         "Wrong size",
	CodeQuota:             "Quota exceeded",
	CodeTokenRequired:     "Token required",
	CodeKeyExpired:        "Key expired",
	CodeChallengeMismatch: "Challenge mismatch",
	CodeChallengeGone:     "Challenge gone",
	CodeProofInvalid:      "Proof invalid",
	CodeDoubleSpend:       "Double spend",
	CodeUnavailable:       "Unavailable",
	CodeInternal:          "Internal error",
}

// Problem is an RFC 9457 problem document as this package writes it, and
// the error type of the client for answers that carry one.
type Problem struct {
	// Type is ProblemType followed by the code.
	Type string `json:"type"`
	// Title is a short summary of the code.
	Title string `json:"title"`
	// Status is the HTTP status.
	Status int `json:"status"`
	// Detail explains this occurrence to a person.
	Detail string `json:"detail"`
	// Code is the stable error code (a Code* constant).
	Code string `json:"code"`
}

// Error returns the code and the detail.
func (p *Problem) Error() string {
	return "privacypass: " + strconv.Itoa(p.Status) + " " + p.Code + ": " + p.Detail
}

// writeProblem writes a problem document with the given status and code.
func writeProblem(w http.ResponseWriter, status int, code, detail string) {
	problem.Write(w, status, problem.Append(nil, ProblemType, code, codeTitles[code], status, detail))
}
