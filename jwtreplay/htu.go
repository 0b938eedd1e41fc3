package jwtreplay

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// NormalizeURI returns the form of an absolute http or https URI that a
// DPoP proof's htu is compared in (RFC 9449 section 4.3): query and fragment
// dropped, then the syntax-based and scheme-based normalizations of RFC 3986
// sections 6.2.2 and 6.2.3: scheme and host in lower case, the default port
// and an empty port removed, percent-encodings in upper case and those of
// unreserved characters decoded, dot segments removed, an empty path made
// "/". A URI with user information is refused.
//
// No well-kept Go library does these normalizations (net/url parses but
// does not normalize), hence this function.
func NormalizeURI(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", err
	}
	scheme := strings.ToLower(u.Scheme)
	switch {
	case scheme != "http" && scheme != "https":
		return "", fmt.Errorf("scheme %q: want http or https", u.Scheme)
	case u.Opaque != "":
		return "", errors.New("not a hierarchical URI")
	case u.User != nil:
		return "", errors.New("user information in the URI")
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if host == "" {
		return "", errors.New("no host")
	}
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	var b strings.Builder
	b.WriteString(scheme)
	b.WriteString("://")
	if strings.Contains(host, ":") {
		b.WriteString("[" + host + "]")
	} else {
		b.WriteString(host)
	}
	if port != "" {
		b.WriteString(":" + port)
	}
	path := removeDotSegments(normalizePercent(u.EscapedPath()))
	if path == "" {
		path = "/"
	}
	b.WriteString(path)
	return b.String(), nil
}

// MatchURI returns nil when the htu claim and the request URI are the same
// once normalized by [NormalizeURI], and an error saying why otherwise.
func MatchURI(htu, requestURI string) error {
	a, err := NormalizeURI(htu)
	if err != nil {
		return fmt.Errorf("htu: %w", err)
	}
	b, err := NormalizeURI(requestURI)
	if err != nil {
		return fmt.Errorf("request URI: %w", err)
	}
	if a != b {
		return fmt.Errorf("%s is not %s", a, b)
	}
	return nil
}

// unreserved reports whether c is an unreserved character (RFC 3986
// section 2.3).
func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// normalizePercent decodes the percent-encodings of unreserved characters
// and writes the others in upper case (RFC 3986 sections 6.2.2.1 and
// 6.2.2.2). Malformed escapes are kept as they are.
func normalizePercent(p string) string {
	if !strings.Contains(p, "%") {
		return p
	}
	const digits = "0123456789ABCDEF"
	b := make([]byte, 0, len(p))
	for i := 0; i < len(p); i++ {
		if p[i] == '%' && i+2 < len(p) {
			hi, ok1 := unhex(p[i+1])
			lo, ok2 := unhex(p[i+2])
			if ok1 && ok2 {
				if c := hi<<4 | lo; unreserved(c) {
					b = append(b, c)
				} else {
					b = append(b, '%', digits[hi], digits[lo])
				}
				i += 2
				continue
			}
		}
		b = append(b, p[i])
	}
	return string(b)
}

// removeDotSegments is the algorithm of RFC 3986 section 5.2.4.
func removeDotSegments(in string) string {
	if !strings.Contains(in, ".") {
		return in
	}
	out := make([]byte, 0, len(in))
	popSegment := func() {
		if i := strings.LastIndexByte(string(out), '/'); i >= 0 {
			out = out[:i]
		} else {
			out = out[:0]
		}
	}
	for len(in) > 0 {
		switch {
		case strings.HasPrefix(in, "../"):
			in = in[3:]
		case strings.HasPrefix(in, "./"):
			in = in[2:]
		case strings.HasPrefix(in, "/./"):
			in = in[2:]
		case in == "/.":
			in = "/"
		case strings.HasPrefix(in, "/../"):
			in = in[3:]
			popSegment()
		case in == "/..":
			in = "/"
			popSegment()
		case in == "." || in == "..":
			in = ""
		default:
			i := strings.IndexByte(in[1:], '/')
			if i < 0 {
				out = append(out, in...)
				in = ""
			} else {
				out = append(out, in[:i+1]...)
				in = in[i+1:]
			}
		}
	}
	return string(out)
}

// RequestURI returns the URI a request was addressed to as this server sees
// it, without query: https when it came over TLS, else http, the Host
// header, and the escaped path. It is the default of DPoPOptions.URI; behind
// a proxy that terminates TLS or rewrites the host or path, return the
// public URI instead.
func RequestURI(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + r.URL.EscapedPath()
}

// DPoPToken returns the access token of the request's "Authorization: DPoP"
// header, or "" when it has none (RFC 9449 section 7.1). It is the default
// of DPoPOptions.AccessToken.
func DPoPToken(r *http.Request) string {
	t, _ := authorization(r, "DPoP")
	return t
}

// authorization returns the credentials of the request's Authorization
// header under scheme (compared case-insensitively), "" when it has none,
// and an error when the request has several Authorization headers.
func authorization(r *http.Request, scheme string) (string, error) {
	vs := r.Header.Values("Authorization")
	switch len(vs) {
	case 0:
		return "", nil
	case 1:
	default:
		return "", refuse(CodeTokenMalformed, "%d Authorization headers: send one", len(vs))
	}
	s, cred, ok := strings.Cut(vs[0], " ")
	if !ok || !strings.EqualFold(s, scheme) {
		return "", nil
	}
	return strings.TrimLeft(cred, " "), nil
}
