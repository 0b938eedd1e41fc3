package privacypass

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/spentledger/spent"
)

// Scheme is the HTTP authentication scheme of RFC 9577.
const Scheme = "PrivateToken"

// Challenge is one PrivateToken challenge of a WWW-Authenticate header
// (RFC 9577 §2.1).
type Challenge struct {
	// TokenChallenge is the parsed challenge.
	TokenChallenge TokenChallenge
	// Raw is the TokenChallenge exactly as sent: its SHA-256 is the digest
	// a token must carry. When writing a header, a nil Raw is computed from
	// TokenChallenge.
	Raw []byte
	// TokenKey is the issuer's public key for the challenge's token type,
	// as in the issuer directory: the RSASSA-PSS SPKI (type 0x0002) or the
	// compressed P-384 point (type 0x0001).
	TokenKey []byte
	// MaxAge is the optional max-age attribute in seconds; -1 when absent.
	MaxAge int
}

// Digest returns the challenge digest a token answering c carries.
func (c *Challenge) Digest() [DigestSize]byte { return ChallengeDigest(c.Raw) }

// String returns the challenge as one WWW-Authenticate value:
// PrivateToken challenge="…", token-key="…"[, max-age=N], with padded
// base64url values in quotes.
func (c *Challenge) String() string {
	raw := c.Raw
	if raw == nil {
		var err error
		if raw, err = c.TokenChallenge.MarshalBinary(); err != nil {
			return ""
		}
	}
	var b strings.Builder
	b.WriteString(Scheme)
	b.WriteString(` challenge="`)
	b.WriteString(base64.URLEncoding.EncodeToString(raw))
	b.WriteString(`", token-key="`)
	b.WriteString(base64.URLEncoding.EncodeToString(c.TokenKey))
	b.WriteByte('"')
	if c.MaxAge >= 0 {
		b.WriteString(", max-age=")
		b.WriteString(strconv.Itoa(c.MaxAge))
	}
	return b.String()
}

// AuthorizationValue returns the Authorization header value that presents
// the token in wire form: PrivateToken token="…" (padded base64url).
func AuthorizationValue(token []byte) string {
	return Scheme + ` token="` + base64.URLEncoding.EncodeToString(token) + `"`
}

// decodeB64URL decodes base64url with or without padding; when padding is
// present it must be exactly right, and the unused bits of the last
// character must be zero, so that one value has one encoding.
func decodeB64URL(s string) ([]byte, error) {
	trimmed := strings.TrimRight(s, "=")
	if trimmed != s {
		if len(s)%4 != 0 || len(s)-len(trimmed) > 2 {
			return nil, fmt.Errorf("%w: bad base64url padding", ErrMalformed)
		}
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(trimmed)
	if err != nil {
		return nil, fmt.Errorf("%w: base64url: %w", ErrMalformed, err)
	}
	if trimmed != s && base64.URLEncoding.EncodeToString(b) != s {
		return nil, fmt.Errorf("%w: bad base64url padding", ErrMalformed)
	}
	return b, nil
}

// authParam is one name=value pair of a challenge or credentials.
type authParam struct{ name, value string }

// authItem is one challenge (or credentials): a scheme and its parameters.
// token68 values are kept but never used by this package.
type authItem struct {
	scheme  string
	token68 string
	params  []authParam
}

func isTchar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// authLexer splits the RFC 9110 §11 challenge and credentials grammar.
type authLexer struct {
	s string
	i int
}

func (l *authLexer) ows() {
	for l.i < len(l.s) && (l.s[l.i] == ' ' || l.s[l.i] == '\t') {
		l.i++
	}
}

func (l *authLexer) token() string {
	j := l.i
	for l.i < len(l.s) && isTchar(l.s[l.i]) {
		l.i++
	}
	return l.s[j:l.i]
}

func (l *authLexer) quoted() (string, error) {
	// l.s[l.i] == '"'
	l.i++
	var b strings.Builder
	for l.i < len(l.s) {
		c := l.s[l.i]
		switch {
		case c == '"':
			l.i++
			return b.String(), nil
		case c == '\\':
			if l.i+1 >= len(l.s) {
				return "", fmt.Errorf("%w: unterminated quoted-string", ErrMalformed)
			}
			b.WriteByte(l.s[l.i+1])
			l.i += 2
		case c == '\t' || c >= 0x20 && c != 0x7f:
			b.WriteByte(c)
			l.i++
		default:
			return "", fmt.Errorf("%w: control character in quoted-string", ErrMalformed)
		}
	}
	return "", fmt.Errorf("%w: unterminated quoted-string", ErrMalformed)
}

// parseAuth parses a comma-separated list of challenges (WWW-Authenticate)
// or one set of credentials (Authorization).
func parseAuth(s string) ([]authItem, error) {
	l := &authLexer{s: s}
	var items []authItem
	for {
		// Empty list elements are allowed: ", , Scheme a=b".
		for {
			l.ows()
			if l.i < len(l.s) && l.s[l.i] == ',' {
				l.i++
				continue
			}
			break
		}
		if l.i >= len(l.s) {
			return items, nil
		}
		scheme := l.token()
		if scheme == "" {
			return nil, fmt.Errorf("%w: expected an auth scheme at byte %d", ErrMalformed, l.i)
		}
		item := authItem{scheme: scheme}
		if l.i < len(l.s) && l.s[l.i] != ' ' && l.s[l.i] != ',' && l.s[l.i] != '\t' {
			return nil, fmt.Errorf("%w: unexpected %q after scheme %s", ErrMalformed, l.s[l.i], spent.QuoteInput(scheme))
		}
		// Parameters until the next scheme or the end.
		for {
			l.ows()
			if l.i >= len(l.s) {
				break
			}
			if l.s[l.i] == ',' {
				l.i++
				continue
			}
			mark := l.i
			name := l.token()
			if name == "" {
				return nil, fmt.Errorf("%w: expected a parameter at byte %d", ErrMalformed, l.i)
			}
			l.ows()
			if l.i >= len(l.s) || l.s[l.i] != '=' {
				// A token not followed by "=": the next challenge's scheme.
				l.i = mark
				break
			}
			// "name=" then a value, or a token68 ending in "=".
			l.i++
			l.ows()
			if l.i >= len(l.s) || l.s[l.i] == ',' || l.s[l.i] == '=' {
				if len(item.params) > 0 || item.token68 != "" {
					return nil, fmt.Errorf("%w: parameter %s without a value", ErrMalformed, spent.QuoteInput(name))
				}
				for l.i < len(l.s) && l.s[l.i] == '=' {
					l.i++
				}
				item.token68 = strings.TrimSpace(l.s[mark:l.i])
				continue
			}
			var value string
			if l.s[l.i] == '"' {
				v, err := l.quoted()
				if err != nil {
					return nil, err
				}
				value = v
			} else {
				value = l.token()
				if value == "" {
					return nil, fmt.Errorf("%w: bad value for parameter %s", ErrMalformed, spent.QuoteInput(name))
				}
			}
			item.params = append(item.params, authParam{name: strings.ToLower(name), value: value})
			l.ows()
			if l.i < len(l.s) && l.s[l.i] != ',' {
				return nil, fmt.Errorf("%w: unexpected %q after parameter %s", ErrMalformed, l.s[l.i], spent.QuoteInput(name))
			}
		}
		items = append(items, item)
	}
}

// param returns the value of the parameter name and whether it was given;
// a parameter given twice is an error.
func (it *authItem) param(name string) (string, bool, error) {
	var v string
	found := false
	for _, p := range it.params {
		if p.name == name {
			if found {
				return "", false, fmt.Errorf("%w: parameter %s given twice", ErrMalformed, spent.QuoteInput(name))
			}
			v, found = p.value, true
		}
	}
	return v, found, nil
}

// ParseChallenges returns the PrivateToken challenges of every
// WWW-Authenticate field in h, in order. Challenges of other schemes are
// skipped. A PrivateToken challenge that is malformed (no challenge, a
// TokenChallenge that does not parse, bad base64url, a bad max-age) is an
// error.
func ParseChallenges(h http.Header) ([]Challenge, error) {
	var out []Challenge
	for _, v := range h.Values("WWW-Authenticate") {
		items, err := parseAuth(v)
		if err != nil {
			return nil, err
		}
		for i := range items {
			it := &items[i]
			if !strings.EqualFold(it.scheme, Scheme) {
				continue
			}
			c, err := challengeOf(it)
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		}
	}
	return out, nil
}

func challengeOf(it *authItem) (Challenge, error) {
	c := Challenge{MaxAge: -1}
	ch, ok, err := it.param("challenge")
	if err != nil {
		return c, err
	}
	if !ok {
		return c, fmt.Errorf("%w: PrivateToken challenge without a challenge parameter", ErrMalformed)
	}
	if c.Raw, err = decodeB64URL(ch); err != nil {
		return c, fmt.Errorf("challenge: %w", err)
	}
	if c.TokenChallenge, err = ParseTokenChallenge(c.Raw); err != nil {
		return c, err
	}
	tk, ok, err := it.param("token-key")
	if err != nil {
		return c, err
	}
	if ok {
		if c.TokenKey, err = decodeB64URL(tk); err != nil {
			return c, fmt.Errorf("token-key: %w", err)
		}
	}
	ma, ok, err := it.param("max-age")
	if err != nil {
		return c, err
	}
	if ok {
		n, err := strconv.ParseUint(ma, 10, 31)
		if err != nil {
			return c, fmt.Errorf("%w: max-age %s", ErrMalformed, spent.QuoteInput(ma))
		}
		c.MaxAge = int(n)
	}
	return c, nil
}

// ParseAuthorization returns the token presented in h's Authorization
// field: ok is false when there is no PrivateToken credential. A
// PrivateToken credential that is malformed (no token parameter, bad
// base64url, more than one) is an error. The token bytes are not parsed;
// see ParseToken.
func ParseAuthorization(h http.Header) (token []byte, ok bool, err error) {
	vs := h.Values("Authorization")
	for _, v := range vs {
		items, err := parseAuth(v)
		if err != nil {
			// Another scheme's credentials may not fit the grammar we
			// parse (a token68 with odd characters); only ours must.
			if !hasSchemePrefix(v) {
				continue
			}
			return nil, false, err
		}
		for i := range items {
			it := &items[i]
			if !strings.EqualFold(it.scheme, Scheme) {
				continue
			}
			if ok {
				return nil, false, fmt.Errorf("%w: more than one PrivateToken credential", ErrMalformed)
			}
			t, found, err := it.param("token")
			if err != nil {
				return nil, false, err
			}
			if !found {
				return nil, false, fmt.Errorf("%w: PrivateToken credential without a token parameter", ErrMalformed)
			}
			if token, err = decodeB64URL(t); err != nil {
				return nil, false, fmt.Errorf("token: %w", err)
			}
			ok = true
		}
	}
	return token, ok, nil
}

func hasSchemePrefix(v string) bool {
	v = strings.TrimLeft(v, " \t")
	return len(v) >= len(Scheme) && strings.EqualFold(v[:len(Scheme)], Scheme)
}
