package console_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spentledger/spent/console"
	"github.com/spentledger/spent/door"
	"github.com/spentledger/spent/internal/syncbuf"
)

// refusedLogin posts tok to the login form of a new browser's session.
func (e *env) refusedLogin(tb testing.TB, tok string) page {
	tb.Helper()
	b := e.browser(tb)
	return b.post("/ui/login", url.Values{"csrf": {csrf(tb, b.get("/ui/login"))}, "token": {tok}})
}

// TestRefusedLoginsAnswerAlike: a token the server does not know, one
// without the admin scope and one too long to be a token all get the same
// answer, byte for byte, so that the page cannot sort guessed tokens; the
// operator's log tells the reasons apart, and never holds the token.
func TestRefusedLoginsAnswerAlike(t *testing.T) {
	var log syncbuf.Buffer
	e := MustOpen(t, tokens, func(c *console.Config) { c.Logger = slog.New(slog.NewTextHandler(&log, nil)) })
	const unknownToken = "not-a-token-0123456789"
	var pages []page
	for _, tok := range []string{unknownToken, claimToken, strings.Repeat("t", console.MaxTokenLen+1)} {
		pages = append(pages, e.refusedLogin(t, tok))
		// The throttle logs an address's first refusal at once and then one
		// line a minute: past the minute, each reason gets its line.
		e.Clock.Add(door.AuthWindow + time.Second)
	}
	unknown := pages[0]
	wantPage(t, "login with an unknown token", unknown, http.StatusUnauthorized, "401: unauthorized", "not an admin token of this server")
	for _, leak := range []string{"unknown", "lacks", "too long"} {
		if strings.Contains(unknown.Body, leak) {
			t.Errorf("refused login's page says %q: want nothing about why the token was refused; body:\n%s", leak, unknown.Body)
		}
	}
	for i, what := range []string{"", "login with a token without the admin scope", "login with a token too long"} {
		if i == 0 {
			continue
		}
		p := pages[i]
		if p.Status != unknown.Status || p.Body != unknown.Body || p.Header.Get("Content-Type") != unknown.Header.Get("Content-Type") {
			t.Errorf("%s: got %d %q, body:\n%s\nwant the answer to an unknown token, %d %q, body:\n%s",
				what, p.Status, p.Header.Get("Content-Type"), p.Body, unknown.Status, unknown.Header.Get("Content-Type"), unknown.Body)
		}
	}
	logged := log.String()
	for _, reason := range []string{`"unknown token"`, `"token without the admin scope"`, `"token too long"`} {
		if !strings.Contains(logged, reason) {
			t.Errorf("log: got\n%s\nwant the reason %s", logged, reason)
		}
	}
	for _, tok := range []string{unknownToken, claimToken} {
		if strings.Contains(logged, tok) {
			t.Errorf("log: got\n%s\nwant no token in it", logged)
		}
	}
}

// TestLoginThrottle: every refused login counts in the sign-in throttle
// (the server's, when given) and waits the delay it returns, doubling for
// an address's failures in a row; the right token is still accepted after
// them, at once: the throttle delays, it does not lock out.
func TestLoginThrottle(t *testing.T) {
	t.Run("Shared", func(t *testing.T) {
		th := door.NewThrottle(nil)
		e := MustOpen(t, tokens, func(c *console.Config) { c.Throttle = th })
		for _, tok := range []string{"not-a-token-0123456789", claimToken, "not-a-token-9876543210"} {
			wantPage(t, "refused login", e.refusedLogin(t, tok), http.StatusUnauthorized)
		}
		if n := th.Total(); n != 3 {
			t.Fatalf("throttle: got %d refusals counted, want 3", n)
		}
		want := []time.Duration{door.FirstAuthDelay, 2 * door.FirstAuthDelay, 4 * door.FirstAuthDelay}
		if got := e.Slept.All(); !slices.Equal(got, want) {
			t.Fatalf("delays waited: got %v, want %v", got, want)
		}
		e.browser(t).login(adminToken)
		if n, got := th.Total(), e.Slept.All(); n != 3 || len(got) != 3 {
			t.Fatalf("after the admin's login: got %d refusals counted and delays %v, want 3 and %v", n, got, want)
		}
	})
	t.Run("OwnWhenNil", func(t *testing.T) {
		e := MustOpen(t, tokens, nil)
		wantPage(t, "refused login", e.refusedLogin(t, claimToken), http.StatusUnauthorized)
		if got, want := e.Slept.All(), []time.Duration{door.FirstAuthDelay}; !slices.Equal(got, want) {
			t.Fatalf("delays waited: got %v, want %v", got, want)
		}
	})
}

// TestHSTS: every answer of the console over TLS (pages, redirects, errors,
// assets) carries Strict-Transport-Security, without includeSubDomains (the
// server does not own its domain's other hosts); over plain HTTP none does.
func TestHSTS(t *testing.T) {
	const want = "max-age=31536000"
	e := MustOpen(t, tokens, nil)
	ts := httptest.NewTLSServer(e.Console)
	t.Cleanup(ts.Close)
	c := ts.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/ui/login", http.StatusOK},
		{"GET", "/ui/", http.StatusSeeOther},
		{"GET", "/ui/nope", http.StatusNotFound},
		{"GET", "/ui/static/console.css", http.StatusOK},
		{"POST", "/ui/login", http.StatusForbidden},
		{"DELETE", "/ui/login", http.StatusMethodNotAllowed},
	} {
		req, err := http.NewRequest(tc.method, ts.URL+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s %s over TLS: got status %d, want %d", tc.method, tc.path, resp.StatusCode, tc.status)
		}
		if got := resp.Header.Get("Strict-Transport-Security"); got != want {
			t.Errorf("%s %s over TLS: got Strict-Transport-Security %q, want %q", tc.method, tc.path, got, want)
		}
	}
	if got := e.browser(t).get("/ui/login").Header.Get("Strict-Transport-Security"); got != "" {
		t.Errorf("GET /ui/login over plain HTTP: got Strict-Transport-Security %q, want none", got)
	}
}
