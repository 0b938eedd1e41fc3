package idempotency

import (
	"errors"
	"strings"
)

// Header names used by the middleware and the client.
const (
	// HeaderKey is the request header that carries the idempotency key
	// (draft-ietf-httpapi-idempotency-key-header).
	HeaderKey = "Idempotency-Key"
	// HeaderReplayed is set to "true" on a response replayed from the
	// ledger, as Stripe does.
	HeaderReplayed = "Idempotent-Replayed"
	// HeaderRetention advertises how long the server remembers a key, in
	// whole seconds, on every response of a route under the middleware
	// (replays and problem documents included). A retry sent later than that
	// after the first request may be treated as a new request.
	HeaderRetention = "Idempotency-Retention"
)

// MaxKeyLen is the longest idempotency key accepted, in characters (bytes:
// keys are ASCII).
const MaxKeyLen = 255

// ErrKeyInvalid is returned by [ParseKey] for a malformed header value.
var ErrKeyInvalid = errors.New("idempotency: malformed Idempotency-Key")

// ParseKey returns the key carried by one Idempotency-Key header value.
//
// The draft standard makes the value an RFC 8941 sf-string: the key in
// double quotes, with \" and \\ as the only escapes. Stripe's clients send
// the key bare, without quotes; both forms are accepted, so "abc" and abc
// name the same key. A value that starts with a double quote is parsed as
// an sf-string and must end with the closing quote (parameters after it are
// not supported); any other value is taken whole.
//
// The key itself, after unquoting, is 1 to [MaxKeyLen] characters of
// visible ASCII (0x21 to 0x7E): letters, digits and punctuation, with no
// spaces, control characters or non-ASCII bytes. A UUID fits.
func ParseKey(value string) (string, error) {
	v := strings.Trim(value, " \t")
	if v == "" {
		return "", ErrKeyInvalid
	}
	if v[0] != '"' {
		if !validKey(v) {
			return "", ErrKeyInvalid
		}
		return v, nil
	}
	// sf-string: DQUOTE *( unescaped / "\" ( DQUOTE / "\" ) ) DQUOTE
	var b strings.Builder
	for i := 1; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '\\':
			i++
			if i == len(v) || v[i] != '"' && v[i] != '\\' {
				return "", ErrKeyInvalid
			}
			b.WriteByte(v[i])
		case c == '"':
			if i != len(v)-1 {
				return "", ErrKeyInvalid // trailing data or parameters
			}
			k := b.String()
			if !validKey(k) {
				return "", ErrKeyInvalid
			}
			return k, nil
		case c < 0x20 || c > 0x7e:
			return "", ErrKeyInvalid
		default:
			b.WriteByte(c)
		}
	}
	return "", ErrKeyInvalid // no closing quote
}

// validKey reports whether k is 1 to MaxKeyLen visible ASCII characters.
func validKey(k string) bool {
	if len(k) == 0 || len(k) > MaxKeyLen {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// FormatKey returns key as an RFC 8941 sf-string, the form the draft
// standard gives the header: in double quotes, with " and \ escaped. It
// returns ErrKeyInvalid for a key outside the character set ParseKey
// accepts.
func FormatKey(key string) (string, error) {
	if !validKey(key) {
		return "", ErrKeyInvalid
	}
	var b strings.Builder
	b.Grow(len(key) + 2)
	b.WriteByte('"')
	for i := 0; i < len(key); i++ {
		if key[i] == '"' || key[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(key[i])
	}
	b.WriteByte('"')
	return b.String(), nil
}
