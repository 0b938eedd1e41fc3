package jwtreplay

import (
	"context"
	"crypto/subtle"
	"errors"
	"net/http"
	"time"
)

// retryAfter is the Retry-After hint of a 503.
const retryAfter = time.Second

type tokenKey struct{}
type proofKey struct{}

// Handler returns next behind the JTI check: a request passes only with a
// token under the configured Authorization scheme that verifies and is
// presented for the first time; [TokenFrom] then returns it. Every refusal
// is a problem document with a stable code: 401 with a WWW-Authenticate
// challenge (RFC 6750: error="invalid_token", none when the token is
// missing), 503 with Retry-After when the ledger failed, 500 on a
// misconfiguration. No request passes without its claim being durable.
func (c *JTI) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, err := authorization(r, c.o.Scheme)
		var t *Token
		if err == nil {
			t, err = c.Verify(r.Context(), tok)
		}
		if err != nil {
			code := ErrorCode(err)
			ch := c.auth
			if code != CodeTokenMissing {
				ch = challenge(c.o.Scheme, "realm", c.o.Realm, "error", "invalid_token", "error_description", problemTitles[code])
			}
			logFailure(c.log, r, err)
			writeError(w, err, ch, retryAfter)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tokenKey{}, t)))
	})
}

// Handler returns next behind the DPoP check: a request passes only with
// exactly one DPoP header holding a proof for this request (method, URI,
// access token) presented for the first time; [ProofFrom] and
// [ThumbprintFrom] then return it. Every refusal is a problem document with
// a stable code: 401 with a WWW-Authenticate challenge (RFC 9449 section
// 7.1: DPoP with algs, and error="invalid_dpop_proof" unless the proof is
// missing), 503 with Retry-After when the ledger failed, 500 on a
// misconfiguration. No request passes without its claim being durable.
//
// The handler checks the proof, not the access token, which the client
// reuses across requests: verify the token yourself and that its cnf.jkt is
// the proof's thumbprint ([CheckBinding]).
func (c *DPoP) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p *Proof
		var err error
		switch vs := r.Header.Values("DPoP"); len(vs) {
		case 0:
			err = refuse(CodeProofMissing, "no DPoP header")
		case 1:
			p, err = c.Verify(r.Context(), ProofRequest{
				Proof: vs[0], Method: r.Method, URI: c.o.URI(r), AccessToken: c.o.AccessToken(r),
			})
		default:
			err = refuse(CodeProofMalformed, "%d DPoP headers: send one", len(vs))
		}
		if err != nil {
			code := ErrorCode(err)
			ch := c.auth
			if code != CodeProofMissing {
				ch = challenge("DPoP", "algs", c.algs(), "error", "invalid_dpop_proof", "error_description", problemTitles[code])
			}
			logFailure(c.log, r, err)
			writeError(w, err, ch, retryAfter)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), proofKey{}, p)))
	})
}

// TokenFrom returns the token a [JTI.Handler] accepted for the request
// whose context is ctx.
func TokenFrom(ctx context.Context) (*Token, bool) {
	t, ok := ctx.Value(tokenKey{}).(*Token)
	return t, ok
}

// ProofFrom returns the proof a [DPoP.Handler] accepted for the request
// whose context is ctx.
func ProofFrom(ctx context.Context) (*Proof, bool) {
	p, ok := ctx.Value(proofKey{}).(*Proof)
	return p, ok
}

// ThumbprintFrom returns the JWK SHA-256 thumbprint of the key of the proof
// a [DPoP.Handler] accepted, the value an access token bound to that key
// carries as cnf.jkt.
func ThumbprintFrom(ctx context.Context) (string, bool) {
	p, ok := ProofFrom(ctx)
	if !ok {
		return "", false
	}
	return p.Thumbprint, true
}

// Errors returned by [CheckBinding].
var (
	// ErrNoProof is returned when the request did not pass a DPoP.Handler.
	ErrNoProof = errors.New("jwtreplay: no DPoP proof in the request context")
	// ErrNotBound is returned when the access token carries no cnf.jkt: it
	// is a bearer token, not bound to a key.
	ErrNotBound = errors.New("jwtreplay: the access token is not bound to a key (no cnf.jkt)")
	// ErrBindingMismatch is returned when the access token is bound to
	// another key than the proof's.
	ErrBindingMismatch = errors.New("jwtreplay: the access token is bound to another key than the DPoP proof's")
)

// CheckBinding returns nil when jkt, an access token's cnf.jkt claim, is the
// thumbprint of the key of the proof accepted for the request whose context
// is ctx (RFC 9449 section 7.1), compared in constant time.
func CheckBinding(ctx context.Context, jkt string) error {
	tp, ok := ThumbprintFrom(ctx)
	if !ok {
		return ErrNoProof
	}
	if jkt == "" {
		return ErrNotBound
	}
	if subtle.ConstantTimeCompare([]byte(tp), []byte(jkt)) != 1 {
		return ErrBindingMismatch
	}
	return nil
}
