package http

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"

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

// MinTokenLen is the shortest bearer token NewServer accepts, in bytes.
const MinTokenLen = 16

// Token is a bearer token and what it may do.
type Token struct {
	// Token is the secret the client sends as "Authorization: Bearer <Token>".
	// It must be at least MinTokenLen bytes of the RFC 6750 token alphabet
	// (letters, digits and -._~+/, then optional = padding).
	Token string
	// Namespaces the token may act in; empty means all.
	Namespaces []string
	// Scopes granted in those namespaces.
	Scopes []Scope
}

// grant is a configured token, kept as a digest so that every comparison
// takes the same time whatever the presented token's length.
type grant struct {
	sum        [sha256.Size]byte
	namespaces map[string]bool // nil: all
	claim      bool
	admin      bool
}

// open is the grant of every request when no tokens are configured.
var open = &grant{claim: true, admin: true}

// allows reports whether g may act in namespace ns; admin asks for the admin
// scope. An empty ns means all namespaces, which only an unrestricted token
// covers.
func (g *grant) allows(ns string, admin bool) bool {
	if admin && !g.admin || !admin && !g.claim {
		return false
	}
	if g.namespaces == nil {
		return true
	}
	return ns != "" && g.namespaces[ns]
}

// ValidToken reports whether t is in the RFC 6750 bearer-token alphabet
// (letters, digits and -._~+/, then optional = padding), as NewServer
// requires of every configured token (which must also be MinTokenLen long).
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

func newGrants(tokens []Token, l *spent.Ledger) ([]grant, error) {
	gs := make([]grant, 0, len(tokens))
	seen := map[string]bool{}
	for i, t := range tokens {
		if len(t.Token) < MinTokenLen || !ValidToken(t.Token) {
			return nil, fmt.Errorf("http: token %d: want at least %d bytes of the bearer token alphabet", i, MinTokenLen)
		}
		if seen[t.Token] {
			return nil, fmt.Errorf("http: token %d: given twice", i)
		}
		seen[t.Token] = true
		g := grant{sum: sha256.Sum256([]byte(t.Token))}
		if len(t.Scopes) == 0 {
			return nil, fmt.Errorf("http: token %d: no scopes", i)
		}
		for _, s := range t.Scopes {
			switch s {
			case ScopeClaim:
				g.claim = true
			case ScopeAdmin:
				g.claim, g.admin = true, true
			default:
				return nil, fmt.Errorf("http: token %d: unknown scope %q", i, s)
			}
		}
		if len(t.Namespaces) > 0 {
			g.namespaces = make(map[string]bool, len(t.Namespaces))
			for _, ns := range t.Namespaces {
				if l != nil {
					if _, ok := l.Policy(ns); !ok {
						return nil, fmt.Errorf("http: token %d: namespace %q is not configured", i, ns)
					}
				}
				g.namespaces[ns] = true
			}
		}
		gs = append(gs, g)
	}
	return gs, nil
}

// authenticate returns the grant of r's bearer token. With no tokens
// configured every request is granted everything.
func (s *Server) authenticate(r *http.Request) (*grant, error) {
	if len(s.grants) == 0 {
		return open, nil
	}
	h := r.Header["Authorization"]
	if len(h) != 1 {
		return nil, errNoToken
	}
	scheme, tok, ok := strings.Cut(h[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return nil, errNoToken
	}
	tok = strings.TrimLeft(tok, " ")
	sum := sha256.Sum256([]byte(tok))
	var match *grant
	for i := range s.grants {
		// Scan every grant, so the time taken says nothing about which matched.
		if subtle.ConstantTimeCompare(sum[:], s.grants[i].sum[:]) == 1 {
			match = &s.grants[i]
		}
	}
	if match == nil {
		return nil, errBadToken
	}
	return match, nil
}

var (
	errNoToken  = spent.Errorf(spent.EUnauthorized, "missing bearer token")
	errBadToken = spent.Errorf(spent.EUnauthorized, "unknown bearer token")
)

func forbidden(ns string, admin bool) error {
	scope := ScopeClaim
	if admin {
		scope = ScopeAdmin
	}
	if ns == "" {
		return spent.Errorf(spent.EForbidden, "token lacks scope %s over all namespaces", scope)
	}
	return spent.Errorf(spent.EForbidden, "token lacks scope %s in namespace %s", scope, spent.QuoteInput(ns))
}
