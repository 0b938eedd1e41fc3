// Package grant holds the bearer tokens a server accepts and what each may
// do. The HTTP API (package http) and the RESP listener (package resp) share
// it, so that one token means the same on both.
package grant

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"

	"github.com/spentledger/spent"
)

// Scope is a permission a token grants within its namespaces.
type Scope string

// The scopes.
const (
	// ScopeClaim allows claim, claims, complete, release and get.
	ScopeClaim Scope = "claim"
	// ScopeAdmin allows everything ScopeClaim does, plus force (completing or
	// releasing a record whose lease ran out, or someone else's) and listing
	// unknown outcomes.
	ScopeAdmin Scope = "admin"
)

// MinTokenLen is the shortest bearer token a server accepts, in bytes.
const MinTokenLen = 16

// Token is a bearer token and what it may do.
type Token struct {
	// Token is the secret the client sends as "Authorization: Bearer <Token>"
	// (over HTTP) or with AUTH (over RESP). It must be at least MinTokenLen
	// bytes of the RFC 6750 token alphabet (letters, digits and -._~+/, then
	// optional = padding).
	Token string
	// Namespaces the token may act in; empty means all.
	Namespaces []string
	// Scopes granted in those namespaces.
	Scopes []Scope
}

// ValidToken reports whether t is in the RFC 6750 bearer-token alphabet
// (letters, digits and -._~+/, then optional = padding).
func ValidToken(t string) bool {
	i := 0
	for i < len(t) {
		c := t[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/' {
			i++
			continue
		}
		break
	}
	if i == 0 {
		return false
	}
	for ; i < len(t); i++ {
		if t[i] != '=' {
			return false
		}
	}
	return true
}

// Grant is what one configured token may do. It keeps the token only as a
// digest, so that every comparison takes the same time whatever the
// presented token's length.
type Grant struct {
	sum        [sha256.Size]byte
	namespaces map[string]bool // nil: all
	claim      bool
	admin      bool
}

// Open is the grant of every request when no tokens are configured.
var Open = &Grant{claim: true, admin: true}

// Allows reports whether g may act in namespace ns; admin asks for the admin
// scope. An empty ns means all namespaces, which only an unrestricted token
// covers.
func (g *Grant) Allows(ns string, admin bool) bool {
	if admin && !g.admin || !admin && !g.claim {
		return false
	}
	if g.namespaces == nil {
		return true
	}
	return ns != "" && g.namespaces[ns]
}

// Set is the grants of a server's tokens.
type Set []Grant

// New checks tokens and returns their grants: each token must be at least
// MinTokenLen bytes of the bearer alphabet, given once, with known scopes
// and, when l is not nil, namespaces configured in l. prefix starts every
// error message ("http", "resp").
func New(prefix string, tokens []Token, l *spent.Ledger) (Set, error) {
	gs := make(Set, 0, len(tokens))
	seen := map[string]bool{}
	for i, t := range tokens {
		if len(t.Token) < MinTokenLen || !ValidToken(t.Token) {
			return nil, fmt.Errorf("%s: token %d: want at least %d bytes of the bearer token alphabet", prefix, i, MinTokenLen)
		}
		if seen[t.Token] {
			return nil, fmt.Errorf("%s: token %d: given twice", prefix, i)
		}
		seen[t.Token] = true
		g := Grant{sum: sha256.Sum256([]byte(t.Token))}
		if len(t.Scopes) == 0 {
			return nil, fmt.Errorf("%s: token %d: no scopes", prefix, i)
		}
		for _, s := range t.Scopes {
			switch s {
			case ScopeClaim:
				g.claim = true
			case ScopeAdmin:
				g.claim, g.admin = true, true
			default:
				return nil, fmt.Errorf("%s: token %d: unknown scope %q", prefix, i, s)
			}
		}
		if len(t.Namespaces) > 0 {
			g.namespaces = make(map[string]bool, len(t.Namespaces))
			for _, ns := range t.Namespaces {
				if l != nil {
					if _, ok := l.Policy(ns); !ok {
						return nil, fmt.Errorf("%s: token %d: namespace %q is not configured", prefix, i, ns)
					}
				}
				g.namespaces[ns] = true
			}
		}
		gs = append(gs, g)
	}
	return gs, nil
}

// Match returns the grant of the presented token, or nil when no configured
// token matches. It compares against every grant, so that the time taken
// says nothing about which matched.
func (s Set) Match(tok string) *Grant {
	sum := sha256.Sum256([]byte(tok))
	var match *Grant
	for i := range s {
		if subtle.ConstantTimeCompare(sum[:], s[i].sum[:]) == 1 {
			match = &s[i]
		}
	}
	return match
}

// Forbidden is the error for a grant that lacks the scope a request needs in
// namespace ns ("" for all namespaces).
func Forbidden(ns string, admin bool) error {
	scope := ScopeClaim
	if admin {
		scope = ScopeAdmin
	}
	if ns == "" {
		return spent.Errorf(spent.EForbidden, "token lacks scope %s over all namespaces", scope)
	}
	return spent.Errorf(spent.EForbidden, "token lacks scope %s in namespace %s", scope, spent.QuoteInput(ns))
}
