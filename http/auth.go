package http

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/door"
	"github.com/spentledger/spent/internal/grant"
)

// Scope is a permission a token grants within its namespaces: ScopeClaim or
// ScopeAdmin. The RESP listener (package resp) takes the same tokens.
type Scope = grant.Scope

// The scopes.
const (
	// ScopeClaim allows claim, claims, complete, release and get.
	ScopeClaim = grant.ScopeClaim
	// ScopeAdmin allows everything ScopeClaim does, plus force (completing or
	// releasing a record whose lease ran out, or someone else's) and listing
	// unknown outcomes.
	ScopeAdmin = grant.ScopeAdmin
)

// MinTokenLen is the shortest bearer token NewServer accepts, in bytes.
const MinTokenLen = grant.MinTokenLen

// Token is a bearer token and what it may do: the secret (at least
// MinTokenLen bytes of the RFC 6750 token alphabet), the namespaces it may
// act in (empty: all) and its scopes there.
type Token = grant.Token

// ValidToken reports whether t is in the RFC 6750 bearer-token alphabet
// (letters, digits and -._~+/, then optional = padding), as NewServer
// requires of every configured token (which must also be MinTokenLen long).
func ValidToken(t string) bool { return grant.ValidToken(t) }

// authenticate returns the grant of r's bearer token. With no tokens
// configured every request is granted everything.
func (s *Server) authenticate(r *http.Request) (*grant.Grant, error) {
	if len(s.grants) == 0 {
		return grant.Open, nil
	}
	h := r.Header["Authorization"]
	if len(h) != 1 {
		return nil, errNoToken
	}
	scheme, tok, ok := strings.Cut(h[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return nil, errNoToken
	}
	match := s.grants.Match(strings.TrimLeft(tok, " "))
	dc := door.FromContext(r.Context())
	if match == nil {
		return nil, errBadToken
	}
	if dc != nil {
		dc.SignIn()
	}
	return match, nil
}

// refused answers for a request whose token was unknown: it counts the
// failure with the server's sign-in throttle, which logs it, marks the
// answer to close the connection once it has sent MaxAuthFailures such
// requests, and waits the throttle's delay before the answer goes.
func (s *Server) refused(w http.ResponseWriter, r *http.Request) {
	delay := s.throttle.Failed("http", r.RemoteAddr, "unknown bearer token")
	if dc := door.FromContext(r.Context()); dc != nil && dc.Failed() >= s.maxAuthFailures {
		w.Header()["Connection"] = hdrClose
	}
	s.sleep(r.Context(), delay)
}

// sleepCtx waits d, or less if ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

var (
	errNoToken  = spent.Errorf(spent.EUnauthorized, "missing bearer token")
	errBadToken = spent.Errorf(spent.EUnauthorized, "unknown bearer token")
)

// forbidden is grant.Forbidden, the error for a token without the scope a
// request needs.
var forbidden = grant.Forbidden
