package jwtreplay

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/spentledger/spent/internal/problem"
)

// ProblemType is the prefix of the "type" member of the middlewares' problem
// documents; the code follows it. It points at the code table in
// docs/jwt.md.
const ProblemType = "https://github.com/spentledger/spent/blob/main/docs/jwt.md#code-"

// Error codes. They are stable: clients may branch on the "code" member of a
// problem document (RFC 9457) answered by the middlewares, and callers of
// [JTI.Verify] and [DPoP.Verify] on [ErrorCode]. Every code but unavailable
// and internal is final for the token or proof presented: a new one is
// needed.
const (
	// CodeTokenMissing (401): the request carries no access token under the
	// configured scheme.
	CodeTokenMissing = "token_missing"
	// CodeTokenMalformed (401): the token is not one compact JWS, is longer
	// than the limit, or its header or claims are not JSON.
	CodeTokenMalformed = "token_malformed"
	// CodeProofMissing (401): the request carries no DPoP header.
	CodeProofMissing = "dpop_missing"
	// CodeProofMalformed (401): more than one DPoP header, or a value that
	// is not one compact JWS within the limit.
	CodeProofMalformed = "dpop_malformed"
	// CodeProofType (401): the proof's typ header is not dpop+jwt.
	CodeProofType = "dpop_type_invalid"
	// CodeProofKey (401): the proof's jwk header is missing, is not an
	// asymmetric public key, or carries private key members.
	CodeProofKey = "dpop_key_invalid"
	// CodeAlgorithmNotAllowed (401): the alg header is none, symmetric where
	// only asymmetric ones are accepted, or not in the configured list.
	CodeAlgorithmNotAllowed = "algorithm_not_allowed"
	// CodeKeyUnknown (401): no key verifies tokens of this issuer and key
	// id.
	CodeKeyUnknown = "key_unknown"
	// CodeSignatureInvalid (401): the signature does not verify.
	CodeSignatureInvalid = "signature_invalid"
	// CodeClaimMissing (401): a required claim is absent (the detail names
	// it): iss, exp or jti in a token (and iat in cap mode); jti, htm, htu
	// or iat in a proof; ath in a proof presented with an access token.
	CodeClaimMissing = "claim_missing"
	// CodeClaimInvalid (401): a claim has the wrong type, is too long, or
	// names an issuer or audience that is not accepted (the detail says
	// which).
	CodeClaimInvalid = "claim_invalid"
	// CodeTokenExpired (401): the token's exp (plus the skew) has passed,
	// or in cap mode its iat plus MaxLifetime.
	CodeTokenExpired = "token_expired"
	// CodeTokenNotYetValid (401): the token's nbf or iat is later than now
	// plus the skew.
	CodeTokenNotYetValid = "token_not_yet_valid"
	// CodeLifetimeTooLong (401): in refuse mode, the token's exp is further
	// than MaxLifetime away; or the ledger refused to remember its id that
	// long (its max_expiry).
	CodeLifetimeTooLong = "lifetime_too_long"
	// CodeMethodMismatch (401): the proof's htm is not the request's method.
	CodeMethodMismatch = "htm_mismatch"
	// CodeURIMismatch (401): the proof's htu is not the request's URI
	// (compared without query and fragment, after RFC 3986 normalization).
	CodeURIMismatch = "htu_mismatch"
	// CodeProofTime (401): the proof's iat is later than now plus the skew,
	// or older than the proof age plus the skew.
	CodeProofTime = "iat_out_of_window"
	// CodeAccessTokenHash (401): the proof's ath is not the SHA-256 of the
	// access token presented with it.
	CodeAccessTokenHash = "ath_mismatch"
	// CodeReplayed (401): the token's (issuer, jti) or the proof's (key,
	// jti) was presented before and is remembered until the detail's time.
	CodeReplayed = "replayed"
	// CodeUnavailable (503, with Retry-After): the ledger could not be
	// written or read; the request did not pass. Retry.
	CodeUnavailable = "unavailable"
	// CodeInternal (500): a misconfiguration (a namespace missing or with
	// another policy, a ledger max_expiry shorter than the proof window) or
	// a bug. The request did not pass.
	CodeInternal = "internal"
)

var problemTitles = map[string]string{
	CodeTokenMissing:        "Access token required",
	CodeTokenMalformed:      "Malformed access token",
	CodeProofMissing:        "DPoP proof required",
	CodeProofMalformed:      "Malformed DPoP proof",
	CodeProofType:           "DPoP proof has the wrong type",
	CodeProofKey:            "DPoP proof key not acceptable",
	CodeAlgorithmNotAllowed: "Signature algorithm not allowed",
	CodeKeyUnknown:          "Unknown signing key",
	CodeSignatureInvalid:    "Invalid signature",
	CodeClaimMissing:        "Required claim missing",
	CodeClaimInvalid:        "Claim not acceptable",
	CodeTokenExpired:        "Token expired",
	CodeTokenNotYetValid:    "Token not yet valid",
	CodeLifetimeTooLong:     "Token lifetime too long",
	CodeMethodMismatch:      "DPoP proof for another method",
	CodeURIMismatch:         "DPoP proof for another URI",
	CodeProofTime:           "DPoP proof outside its time window",
	CodeAccessTokenHash:     "DPoP proof for another access token",
	CodeReplayed:            "Replayed",
	CodeUnavailable:         "Ledger unavailable",
	CodeInternal:            "Internal error",
}

// Error is a refusal with a stable code (the Code constants) and a message
// naming the cause.
type Error struct {
	// Code is one of the Code constants.
	Code string
	// Message explains this refusal to a person.
	Message string
	// Err is the cause, if any.
	Err error
}

// Error returns the code and the message.
func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("jwtreplay: %s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("jwtreplay: %s: %s", e.Code, e.Message)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// ErrorCode returns the code of the *Error in err's chain, [CodeInternal]
// for any other non-nil error, and "" for nil.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

func refuse(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

func refuseErr(code string, err error, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Err: err}
}

// statusOf returns the HTTP status of a code.
func statusOf(code string) int {
	switch code {
	case CodeUnavailable:
		return http.StatusServiceUnavailable
	case CodeInternal:
		return http.StatusInternalServerError
	}
	return http.StatusUnauthorized
}

// writeError answers err as a problem document with challenge as the
// WWW-Authenticate value of a 401 (built by the caller from the code).
func writeError(w http.ResponseWriter, err error, challenge string, retryAfter time.Duration) {
	code := ErrorCode(err)
	status := statusOf(code)
	detail := err.Error()
	var e *Error
	if errors.As(err, &e) {
		detail = e.Message
	}
	h := w.Header()
	if status == http.StatusUnauthorized && challenge != "" {
		h.Set("WWW-Authenticate", challenge)
	}
	if status == http.StatusServiceUnavailable {
		h.Set("Retry-After", problem.RetryAfter(retryAfter))
	}
	problem.Write(w, status, problem.Append(nil, ProblemType, code, problemTitles[code], status, detail))
}

// challenge builds a WWW-Authenticate value: scheme, then the parameters in
// order (name, value pairs), values as quoted strings. Empty values are left
// out.
func challenge(scheme string, params ...string) string {
	var b strings.Builder
	b.WriteString(scheme)
	first := true
	for i := 0; i+1 < len(params); i += 2 {
		if params[i+1] == "" {
			continue
		}
		if first {
			b.WriteByte(' ')
			first = false
		} else {
			b.WriteString(", ")
		}
		b.WriteString(params[i])
		b.WriteString(`="`)
		for _, r := range params[i+1] {
			switch {
			case r == '"' || r == '\\' || r < 0x20 || r > 0x7e:
				// RFC 6750 section 3: printable ASCII but for '"' and '\'.
				b.WriteByte('?')
			default:
				b.WriteRune(r)
			}
		}
		b.WriteByte('"')
	}
	return b.String()
}
