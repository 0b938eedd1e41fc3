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
// requests, and waits the throttle's delay before the answer goes. While
// it waits its connection counts as idle, so that a newcomer may close it
// to make room, which ends the wait: refused sign-ins cannot hold the
// unauthenticated share, nor a goroutine past their connection.
func (s *Server) refused(w http.ResponseWriter, r *http.Request) {
	delay := s.throttle.Failed("http", r.RemoteAddr, "unknown bearer token")
	var closed <-chan struct{}
	if dc := door.FromContext(r.Context()); dc != nil {
		if dc.Failed() >= s.maxAuthFailures {
			w.Header()["Connection"] = hdrClose
		}
		if !dc.SignedIn() {
			dc.Busy(false)
		}
		closed = dc.Closed()
	}
	s.sleep(r.Context(), delay, closed)
}

// sleepCtx waits d, or less if ctx ends or closed is closed.
func sleepCtx(ctx context.Context, d time.Duration, closed <-chan struct{}) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-closed:
	}
}

// Authorized reports whether r carries a valid bearer token (any scope), or
// arrived on a connection that already sent one, or the server has no
// tokens: the requests whose bodies may draw on the whole budget of bytes
// in flight (see LimitBodiesWith); the others share a part of it.
func (s *Server) Authorized(r *http.Request) bool {
	if len(s.grants) == 0 {
		return true
	}
	if dc := door.FromContext(r.Context()); dc != nil && dc.SignedIn() {
		return true
	}
	h := r.Header["Authorization"]
	if len(h) != 1 {
		return false
	}
	scheme, tok, ok := strings.Cut(h[0], " ")
	return ok && strings.EqualFold(scheme, "Bearer") && s.grants.Match(strings.TrimLeft(tok, " ")) != nil
}

var (
	errNoToken  = spent.Errorf(spent.EUnauthorized, "missing bearer token")
	errBadToken = spent.Errorf(spent.EUnauthorized, "unknown bearer token")
)

// forbidden is grant.Forbidden, the error for a token without the scope a
// request needs.
var forbidden = grant.Forbidden
