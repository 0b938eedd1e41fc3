package jwtreplay_test

import (
	"testing"

	"github.com/spentledger/spent/jwtreplay"
)

func TestNormalizeURI(t *testing.T) {
	// Equivalences from RFC 3986 sections 6.2.2 and 6.2.3, and RFC 9449's
	// "without query and fragment".
	for _, tc := range []struct{ in, want string }{
		{"HTTP://www.Example.com/", "http://www.example.com/"},
		{"http://a/b/c/%7Bfoo%7D", "http://a/b/c/%7Bfoo%7D"},
		{"http://a/./b/../b/%63/%7bfoo%7d", "http://a/b/c/%7Bfoo%7D"},
		{"http://example.com", "http://example.com/"},
		{"http://example.com/", "http://example.com/"},
		{"http://example.com:/", "http://example.com/"},
		{"http://example.com:80/", "http://example.com/"},
		{"https://example.com:443/x", "https://example.com/x"},
		{"https://example.com:80/x", "https://example.com:80/x"},
		{"https://example.com/a/b/../../..", "https://example.com/"},
		{"https://example.com/a/%2E%2E/b", "https://example.com/b"},
		{"https://example.com/a?b=c#d", "https://example.com/a"},
		{"https://[::1]:8443/x", "https://[::1]:8443/x"},
		{"https://EXAMPLE.com/A%2fB", "https://example.com/A%2FB"},
	} {
		got, err := jwtreplay.NormalizeURI(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("NormalizeURI(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{
		"", "/relative", "ftp://example.com/", "https://user:pw@example.com/", "https:///nohost", "mailto:a@example.com", "http://%zz/",
	} {
		if got, err := jwtreplay.NormalizeURI(in); err == nil {
			t.Errorf("NormalizeURI(%q) = %q, want an error", in, got)
		}
	}
}

func FuzzNormalizeURI(f *testing.F) {
	for _, s := range []string{"https://a/./b/../c", "http://A:80", "https://x/%7e%2f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := jwtreplay.NormalizeURI(s)
		if err != nil {
			return
		}
		// Normalizing is idempotent: a normalized URI is its own form.
		again, err := jwtreplay.NormalizeURI(n)
		if err != nil || again != n {
			t.Fatalf("NormalizeURI(%q) = %q, then %q, %v", s, n, again, err)
		}
	})
}
