// Package dsn splits the DSNs of stores that name a list of servers, such as
//
//	redis-cluster://user:password@a:7000,b:7001?wait_replicas=1
//	etcd://h1:2379,h2:2379,h3:2379/prefix
//
// which net/url refuses (a list of hosts is not a URL host), and hides the
// passwords of any DSN for messages and logs.
//
// In the common case a store's ParseURL calls [Parse], checks each of
// DSN.Hosts with [HostPort], and reads DSN.Path and DSN.RawQuery itself; an
// error that quotes the DSN quotes [Redact] of it.
//
// # Guarantees
//
//   - Redact never returns a password that Parse would read from the same
//     string, nor the value of a query parameter whose name contains
//     "password", however the string is malformed.
//   - Parse's errors never quote the password.
//
// # Caveats
//
//   - Parse does not check hosts, ports or the path: the stores differ in
//     what they take there (a default port, a database number, a key
//     prefix).
//   - A password holding '/', '?' or '@' must be percent-encoded, as in any
//     URL; Redact then still hides what it can mistake for one.
package dsn

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// DSN is a data source name split into its parts:
//
//	scheme://[user[:password]@]host[:port],host[:port],...[/path][?query]
type DSN struct {
	// Scheme is the part before "://".
	Scheme string
	// Username and Password are the userinfo, percent-decoded; both are
	// empty without one.
	Username, Password string
	// Hosts are the comma-separated hosts as written (each "host",
	// "host:port", "[v6]" or "[v6]:port"; check them with HostPort). An
	// empty list is nil; an empty entry ("a,,b") is kept as "".
	Hosts []string
	// Path is what follows the first "/" after the hosts, still
	// percent-encoded; HasPath tells "h/" (an empty path) from "h".
	Path    string
	HasPath bool
	// RawQuery is what follows the first "?", for url.ParseQuery.
	RawQuery string
}

// ErrNoScheme is returned by Parse for a string without "://".
var ErrNoScheme = errors.New("no scheme://")

// Parse splits s into its parts. It returns ErrNoScheme for a string without
// "://", and an error naming the part at fault when the userinfo has an
// invalid percent-escape.
func Parse(s string) (DSN, error) {
	var d DSN
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return d, ErrNoScheme
	}
	d.Scheme = scheme
	rest, d.RawQuery, _ = strings.Cut(rest, "?")
	authority, path, hasPath := strings.Cut(rest, "/")
	d.Path, d.HasPath = path, hasPath
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		user, pass, _ := strings.Cut(authority[:at], ":")
		var err error
		if d.Username, err = url.PathUnescape(user); err != nil {
			return d, fmt.Errorf("user: %w", err)
		}
		if d.Password, err = url.PathUnescape(pass); err != nil {
			// Not %w: url.EscapeError quotes the bytes of the password.
			return d, errors.New("password: invalid escape")
		}
		authority = authority[at+1:]
	}
	if authority != "" {
		d.Hosts = strings.Split(authority, ",")
	}
	return d, nil
}

// ErrEmptyHost is returned by HostPort for an empty entry of a host list.
var ErrEmptyHost = errors.New("empty host")

// HostPort checks one host of a list and returns it as host:port (IPv6 in
// brackets), with defaultPort when the host has no port. An empty
// defaultPort makes the port required. The port, when given, must be a
// number from 1 to 65535; a host without brackets may hold colons only if
// it is an IPv6 address ("::1", which takes the default port).
func HostPort(h, defaultPort string) (string, error) {
	if h == "" {
		return "", ErrEmptyHost
	}
	host, port, err := net.SplitHostPort(h)
	if err != nil {
		// No port: "host", "[v6]", or a bare IPv6 address.
		host = h
		if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
			host = h[1 : len(h)-1]
		}
		if strings.ContainsAny(host, "[]") || (strings.Contains(host, ":") && net.ParseIP(host) == nil) {
			return "", fmt.Errorf("host %q: want host:port, with an IPv6 address in brackets", h)
		}
		port = defaultPort
	}
	if host == "" || strings.ContainsAny(host, " \t\r\n/?#@") {
		return "", fmt.Errorf("host %q: want host:port", h)
	}
	if port == "" {
		return "", fmt.Errorf("host %q: no port: want host:port", h)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return "", fmt.Errorf("host %q: port %q: want a number from 1 to 65535", h, port)
	}
	return net.JoinHostPort(host, port), nil
}

// hidden replaces a password in Redact's answers.
const hidden = "xxxxx"

// Redact returns s with its passwords replaced by "xxxxx", for messages and
// logs: the password of the userinfo (the user name stays, as
// url.URL.Redacted writes it) and the value of every query parameter whose
// name contains "password" (as libpq's password and sslpassword). The
// userinfo is taken to end at the last '@' of the string, so that a
// password with an unescaped '/' or '?' is hidden too, at the cost of
// hiding more than the password when a path or a parameter holds an '@'.
// A string without "://" that holds an '@', '=' or the word "password" is
// hidden whole: it may be a key=value DSN or a mistyped URL with a password.
func Redact(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		if strings.ContainsAny(s, "@=") || strings.Contains(strings.ToLower(s), "password") {
			return "(DSN hidden: it may hold a password)"
		}
		return s
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		if user, _, hasPass := strings.Cut(rest[:at], ":"); hasPass {
			rest = user + ":" + hidden + rest[at:]
		}
	}
	head, query, hasQuery := strings.Cut(rest, "?")
	if !hasQuery {
		return scheme + "://" + head
	}
	params := strings.Split(query, "&")
	for i, p := range params {
		name, _, _ := strings.Cut(p, "=")
		if n, err := url.QueryUnescape(name); err == nil {
			name = n
		}
		if strings.Contains(strings.ToLower(name), "password") {
			params[i] = p[:strings.IndexByte(p+"=", '=')] + "=" + hidden
		}
	}
	return scheme + "://" + head + "?" + strings.Join(params, "&")
}
