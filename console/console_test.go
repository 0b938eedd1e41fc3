package console_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/console"
	sphttp "github.com/spentledger/spent/http"
	"github.com/spentledger/spent/inmem"
	"github.com/spentledger/spent/node"
)

const (
	adminToken    = "admin-token-0123456789"
	claimToken    = "claim-token-0123456789"
	paymentsAdmin = "payments-admin-0123456789"
)

var tokens = []sphttp.Token{
	{Token: adminToken, Scopes: []sphttp.Scope{sphttp.ScopeAdmin}},
	{Token: claimToken, Scopes: []sphttp.Scope{sphttp.ScopeClaim}},
	{Token: paymentsAdmin, Namespaces: []string{"payments"}, Scopes: []sphttp.Scope{sphttp.ScopeAdmin}},
}

// clock is a fake clock that tests move by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// env is a ledger on an in-memory store with the API at / and the console
// at /ui/, as spent serve mounts them, sharing one metrics registry.
type env struct {
	Ledger  *spent.Ledger
	Clock   *clock
	Srv     *httptest.Server
	Console *console.Console
	// Slept records the delays the console waited before it answered
	// refused logins, which it does not really wait in tests.
	Slept sleeps
}

// sleeps records the delays of a console's refused logins.
type sleeps struct {
	mu sync.Mutex
	ds []time.Duration
}

func (s *sleeps) sleep(_ context.Context, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ds = append(s.ds, d)
}

// All returns the delays recorded so far, in order.
func (s *sleeps) All() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.ds...)
}

// MustOpen starts an env with the given tokens (none: auth off); edit
// changes the console's configuration.
func MustOpen(tb testing.TB, toks []sphttp.Token, edit func(*console.Config)) *env {
	tb.Helper()
	ck := &clock{now: time.Date(2026, 12, 3, 2, 0, 0, 0, time.UTC)}
	lc := spent.DefaultConfig()
	lc.Secret = []byte("console test secret, 32 bytes or more")
	lc.Now = ck.Now
	lc.Namespaces = map[string]spent.Policy{
		"payments": {Mode: spent.ModeEcho, Retention: time.Hour, Lease: time.Second, OnLeaseExpiry: spent.LeaseExpiryHold},
		"tickets":  {Mode: spent.ModeRefuse, Retention: time.Hour, Lease: time.Second, OnLeaseExpiry: spent.LeaseExpiryRetake},
	}
	reg := prometheus.NewRegistry()
	obs, err := node.LedgerMetrics(lc.Namespaces, reg)
	if err != nil {
		tb.Fatal(err)
	}
	lc.Observer = obs
	l, err := spent.NewLedger(context.Background(), inmem.New(), lc)
	if err != nil {
		tb.Fatal(err)
	}
	hc := sphttp.DefaultConfig()
	hc.Tokens = toks
	hc.Registerer, hc.Gatherer = reg, reg
	api, err := sphttp.NewServer(l, hc)
	if err != nil {
		tb.Fatal(err)
	}
	cc := console.DefaultConfig(l)
	cc.Tokens = toks
	cc.Gatherer = reg
	cc.Now = ck.Now
	if edit != nil {
		edit(&cc)
	}
	c, err := console.New(cc)
	if err != nil {
		tb.Fatal(err)
	}
	e := &env{Ledger: l, Clock: ck, Console: c}
	console.SetSleep(c, e.Slept.sleep)
	mux := http.NewServeMux()
	mux.Handle("/", api)
	mux.Handle(console.Prefix, c)
	e.Srv = httptest.NewServer(mux)
	tb.Cleanup(e.Srv.Close)
	return e
}

// browser is an HTTP client with cookies that does not follow redirects.
type browser struct {
	tb testing.TB
	c  *http.Client
	e  *env
}

func (e *env) browser(tb testing.TB) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{tb: tb, e: e, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

// page is an answer: status, headers and body.
type page struct {
	Status int
	Header http.Header
	Body   string
}

func (b *browser) do(req *http.Request) page {
	b.tb.Helper()
	resp, err := b.c.Do(req)
	if err != nil {
		b.tb.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.tb.Fatal(err)
	}
	return page{resp.StatusCode, resp.Header, string(body)}
}

func (b *browser) get(path string) page {
	b.tb.Helper()
	req, _ := http.NewRequest("GET", b.e.Srv.URL+path, nil)
	return b.do(req)
}

func (b *browser) post(path string, form url.Values, hdr ...string) page {
	b.tb.Helper()
	req, _ := http.NewRequest("POST", b.e.Srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return b.do(req)
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf returns the CSRF token of the forms of p.
func csrf(tb testing.TB, p page) string {
	tb.Helper()
	m := csrfRE.FindStringSubmatch(p.Body)
	if m == nil {
		tb.Fatalf("no CSRF token in page:\n%s", p.Body)
	}
	return m[1]
}

// login logs b in with tok and returns the CSRF token of its session.
func (b *browser) login(tok string) string {
	b.tb.Helper()
	lp := b.get("/ui/login")
	if lp.Status != http.StatusOK {
		b.tb.Fatalf("GET /ui/login: got %d, want 200", lp.Status)
	}
	p := b.post("/ui/login", url.Values{"csrf": {csrf(b.tb, lp)}, "token": {tok}})
	if p.Status != http.StatusSeeOther || p.Header.Get("Location") != "/ui/" {
		b.tb.Fatalf("login: got %d to %q, want 303 to /ui/; body:\n%s", p.Status, p.Header.Get("Location"), p.Body)
	}
	main := b.get("/ui/")
	if main.Status != http.StatusOK {
		b.tb.Fatalf("GET /ui/ after login: got %d, want 200", main.Status)
	}
	return csrf(b.tb, main)
}

func wantPage(tb testing.TB, what string, p page, status int, wants ...string) {
	tb.Helper()
	if p.Status != status {
		tb.Fatalf("%s: got status %d, want %d; body:\n%s", what, p.Status, status, p.Body)
	}
	for _, w := range wants {
		if !strings.Contains(p.Body, w) {
			tb.Fatalf("%s: got body\n%s\nwant it to contain %q", what, p.Body, w)
		}
	}
}

// unknown makes an unknown outcome in payments: a two-step claim whose
// lease runs out. It returns the fresh answer.
func (e *env) unknown(tb testing.TB, key string) spent.Answer {
	tb.Helper()
	a, err := e.Ledger.Claim(context.Background(), spent.Claim{Namespace: "payments", Key: key, Place: "gate-7"})
	if err != nil || a.Outcome != spent.Fresh {
		tb.Fatalf("claim %s: got %v, %v, want fresh", key, a.Outcome, err)
	}
	e.Clock.Add(2 * time.Second) // past the 1s lease
	return a
}

func TestHeaders(t *testing.T) {
	e := MustOpen(t, nil, nil)
	b := e.browser(t)
	for _, path := range []string{"/ui/", "/ui/login", "/ui/chart.svg", "/ui/static/console.js", "/ui/nope"} {
		t.Run(strings.TrimPrefix(path, "/ui/"), func(t *testing.T) {
			p := b.get(path)
			for k, want := range map[string]string{
				"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
				"X-Content-Type-Options":  "nosniff",
				"Referrer-Policy":         "no-referrer",
				"Cache-Control":           "no-store",
			} {
				if got := p.Header.Get(k); got != want {
					t.Errorf("%s: got %q, want %q", k, got, want)
				}
			}
		})
	}
	t.Run("NoInlineScriptOrStyle", func(t *testing.T) {
		body := b.get("/ui/").Body
		for _, bad := range []string{"<script>", "<style", " style=", " onclick=", " onsubmit="} {
			if strings.Contains(body, bad) {
				t.Errorf("page contains %q, which the CSP refuses", bad)
			}
		}
	})
	t.Run("MethodNotAllowedPage", func(t *testing.T) {
		p := b.get("/ui/resolve")
		wantPage(t, "GET /ui/resolve", p, http.StatusMethodNotAllowed, "method_not_allowed", "takes POST")
		if got := p.Header.Get("Allow"); got != "POST" {
			t.Fatalf("Allow: got %q, want POST", got)
		}
	})
	t.Run("NotFoundPage", func(t *testing.T) {
		wantPage(t, "GET /ui/nope", b.get("/ui/nope"), http.StatusNotFound, "not_found", "/ui/nope")
	})
}

func TestAuth(t *testing.T) {
	e := MustOpen(t, tokens, nil)
	t.Run("PageNeedsLogin", func(t *testing.T) {
		p := e.browser(t).get("/ui/")
		if p.Status != http.StatusSeeOther || p.Header.Get("Location") != "/ui/login" {
			t.Fatalf("GET /ui/ without session: got %d to %q, want 303 to /ui/login", p.Status, p.Header.Get("Location"))
		}
	})
	t.Run("ChartNeedsLogin", func(t *testing.T) {
		if p := e.browser(t).get("/ui/chart.svg"); p.Status != http.StatusSeeOther {
			t.Fatalf("GET /ui/chart.svg without session: got %d, want 303", p.Status)
		}
	})
	t.Run("ClaimTokenRefused", func(t *testing.T) {
		b := e.browser(t)
		p := b.post("/ui/login", url.Values{"csrf": {csrf(t, b.get("/ui/login"))}, "token": {claimToken}})
		wantPage(t, "login with a claim token", p, http.StatusUnauthorized, "unauthorized", "not an admin token of this server")
		if p := b.get("/ui/"); p.Status != http.StatusSeeOther {
			t.Fatalf("GET /ui/ after a refused login: got %d, want 303", p.Status)
		}
	})
	t.Run("UnknownTokenRefused", func(t *testing.T) {
		b := e.browser(t)
		p := b.post("/ui/login", url.Values{"csrf": {csrf(t, b.get("/ui/login"))}, "token": {"not-a-token-0123456789"}})
		wantPage(t, "login with an unknown token", p, http.StatusUnauthorized, "unauthorized", "not an admin token of this server")
	})
	t.Run("AdminLogsIn", func(t *testing.T) {
		b := e.browser(t)
		lp := b.get("/ui/login")
		p := b.post("/ui/login", url.Values{"csrf": {csrf(t, lp)}, "token": {adminToken}})
		ck := p.Header.Get("Set-Cookie")
		for _, want := range []string{"HttpOnly", "SameSite=Strict", "Path=/ui/", "Max-Age=3600"} {
			if !strings.Contains(ck, want) {
				t.Errorf("session cookie: got %q, want it to contain %q", ck, want)
			}
		}
		if strings.Contains(ck, adminToken) || strings.Contains(ck, "Secure") {
			t.Errorf("session cookie: got %q, want neither the token nor Secure (no TLS)", ck)
		}
		wantPage(t, "GET /ui/ logged in", b.get("/ui/"), http.StatusOK, `data-namespace="payments"`, `data-namespace="tickets"`, "Log out")
	})
	t.Run("LoginRotatesSession", func(t *testing.T) {
		b := e.browser(t)
		lp := b.get("/ui/login")
		before := b.c.Jar.Cookies(mustURL(t, e.Srv.URL+"/ui/"))
		b.post("/ui/login", url.Values{"csrf": {csrf(t, lp)}, "token": {adminToken}})
		after := b.c.Jar.Cookies(mustURL(t, e.Srv.URL+"/ui/"))
		if len(before) != 1 || len(after) != 1 || before[0].Value == after[0].Value {
			t.Fatalf("session cookie: got %v before login and %v after, want one each, different", before, after)
		}
	})
	t.Run("NamespaceAdminSeesItsNamespaces", func(t *testing.T) {
		b := e.browser(t)
		b.login(paymentsAdmin)
		p := b.get("/ui/")
		wantPage(t, "GET /ui/ as payments admin", p, http.StatusOK, `data-namespace="payments"`)
		if strings.Contains(p.Body, `data-namespace="tickets"`) {
			t.Fatalf("payments admin: got a page showing tickets, want only payments")
		}
		lookup := b.post("/ui/lookup", url.Values{"csrf": {csrf(t, p)}, "namespace": {"tickets"}, "key": {"t-1"}})
		wantPage(t, "lookup in tickets as payments admin", lookup, http.StatusForbidden, "forbidden")
	})
	t.Run("Logout", func(t *testing.T) {
		b := e.browser(t)
		tok := b.login(adminToken)
		if p := b.post("/ui/logout", url.Values{"csrf": {tok}}); p.Status != http.StatusSeeOther {
			t.Fatalf("logout: got %d, want 303", p.Status)
		}
		if p := b.get("/ui/"); p.Status != http.StatusSeeOther {
			t.Fatalf("GET /ui/ after logout: got %d, want 303 to the login", p.Status)
		}
	})
	t.Run("SessionExpires", func(t *testing.T) {
		b := e.browser(t)
		b.login(adminToken)
		e.Clock.Add(console.DefaultSessionLife)
		if p := b.get("/ui/"); p.Status != http.StatusSeeOther {
			t.Fatalf("GET /ui/ after the session's life: got %d, want 303 to the login", p.Status)
		}
	})
}

func mustURL(tb testing.TB, s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		tb.Fatal(err)
	}
	return u
}

func TestCSRF(t *testing.T) {
	e := MustOpen(t, tokens, nil)
	a := e.unknown(t, "pay-csrf")
	b := e.browser(t)
	tok := b.login(adminToken)
	form := func(csrf string) url.Values {
		return url.Values{"csrf": {csrf}, "namespace": {"payments"}, "hash": {a.Record.Hash.String()}, "seq": {a.Record.Seq.String()}, "action": {"release"}}
	}
	for _, tc := range []struct {
		name   string
		b      *browser
		form   url.Values
		hdr    []string
		status int
		code   string
	}{
		{"Missing", b, func() url.Values { f := form(""); f.Del("csrf"); return f }(), nil, http.StatusForbidden, "csrf_failed"},
		{"Wrong", b, form(strings.Repeat("A", len(tok))), nil, http.StatusForbidden, "csrf_failed"},
		{"OtherSession", e.browser(t), form(tok), nil, http.StatusForbidden, "no_session"},
		{"CrossSite", b, form(tok), []string{"Sec-Fetch-Site", "cross-site"}, http.StatusForbidden, "cross_origin"},
		{"OtherOrigin", b, form(tok), []string{"Origin", "https://evil.example"}, http.StatusForbidden, "cross_origin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantPage(t, "resolve", tc.b.post("/ui/resolve", tc.form, tc.hdr...), tc.status, tc.code)
			rec, err := e.Ledger.Get(context.Background(), "payments", "pay-csrf")
			if err != nil || rec.State != spent.StatePending {
				t.Fatalf("record after a refused resolve: got %v, %v, want pending", rec.State, err)
			}
		})
	}
	t.Run("LoginNeedsCSRF", func(t *testing.T) {
		b := e.browser(t)
		b.get("/ui/login")
		wantPage(t, "login without CSRF", b.post("/ui/login", url.Values{"token": {adminToken}}), http.StatusForbidden, "csrf_failed")
	})
	t.Run("SameOriginAccepted", func(t *testing.T) {
		p := b.post("/ui/resolve", form(tok), "Sec-Fetch-Site", "same-origin")
		if p.Status != http.StatusSeeOther {
			t.Fatalf("resolve with CSRF token, same origin: got %d, want 303; body:\n%s", p.Status, p.Body)
		}
	})
}

func TestResolve(t *testing.T) {
	e := MustOpen(t, tokens, nil)
	ctx := context.Background()
	a1, a2, a3 := e.unknown(t, "pay-1"), e.unknown(t, "pay-2"), e.unknown(t, "pay-3")
	b := e.browser(t)
	tok := b.login(adminToken)
	main := b.get("/ui/")
	wantPage(t, "main page", main, http.StatusOK, `data-hash="`+a1.Record.Hash.String()+`"`, `data-hash="`+a2.Record.Hash.String()+`"`, a1.Record.Seq.String(), "gate-7")
	if strings.Contains(main.Body, "pay-1") {
		t.Fatalf("main page shows the raw key pay-1 of a namespace without store_raw_key")
	}
	resolve := func(a spent.Answer, action, result, seq string) page {
		return b.post("/ui/resolve", url.Values{"csrf": {tok}, "namespace": {"payments"}, "hash": {a.Record.Hash.String()},
			"seq": {seq}, "action": {action}, "result": {result}})
	}
	t.Run("Complete", func(t *testing.T) {
		p := resolve(a1, "complete", `{"status":"paid"}`, a1.Record.Seq.String())
		if p.Status != http.StatusSeeOther {
			t.Fatalf("complete: got %d, want 303; body:\n%s", p.Status, p.Body)
		}
		rec, err := e.Ledger.Get(ctx, "payments", "pay-1")
		if err != nil || rec.State != spent.StateComplete || string(rec.Result) != `{"status":"paid"}` {
			t.Fatalf("record after complete: got %v %q, %v, want complete {\"status\":\"paid\"}", rec.State, rec.Result, err)
		}
		wantPage(t, "page after complete", b.get("/ui/"), http.StatusOK, "completed")
	})
	t.Run("Release", func(t *testing.T) {
		if p := resolve(a2, "release", "", a2.Record.Seq.String()); p.Status != http.StatusSeeOther {
			t.Fatalf("release: got %d, want 303; body:\n%s", p.Status, p.Body)
		}
		if _, err := e.Ledger.Get(ctx, "payments", "pay-2"); spent.ErrorCode(err) != spent.ENotFound {
			t.Fatalf("record after release: got %v, want not_found", err)
		}
	})
	t.Run("AlreadyResolved", func(t *testing.T) {
		wantPage(t, "complete again", resolve(a1, "complete", "other", a1.Record.Seq.String()), http.StatusConflict, "not_pending", "someone resolved it")
	})
	t.Run("SeqMismatch", func(t *testing.T) {
		wantPage(t, "complete with another seq", resolve(a3, "complete", "x", "1:999999"), http.StatusConflict, "seq_mismatch", "Reload the page")
	})
	t.Run("ReleaseWithResult", func(t *testing.T) {
		wantPage(t, "release with a result", resolve(a3, "release", "x", a3.Record.Seq.String()), http.StatusBadRequest, "invalid", "takes no result")
	})
	t.Run("BadAction", func(t *testing.T) {
		wantPage(t, "action burn", resolve(a3, "burn", "", a3.Record.Seq.String()), http.StatusBadRequest, "invalid", "want complete or release")
	})
	t.Run("BadHash", func(t *testing.T) {
		p := b.post("/ui/resolve", url.Values{"csrf": {tok}, "namespace": {"payments"}, "hash": {"xyz"}, "seq": {"1:1"}, "action": {"release"}})
		wantPage(t, "hash xyz", p, http.StatusBadRequest, "invalid", "hash")
	})
	t.Run("StillPending", func(t *testing.T) {
		rec, err := e.Ledger.Get(ctx, "payments", "pay-3")
		if err != nil || rec.State != spent.StatePending {
			t.Fatalf("pay-3 after refused resolves: got %v, %v, want pending", rec.State, err)
		}
	})
}

func TestLookup(t *testing.T) {
	e := MustOpen(t, nil, nil)
	ctx := context.Background()
	if _, err := e.Ledger.Claim(ctx, spent.Claim{Namespace: "tickets", Key: "ticket-1", Place: "gate-2", Result: []byte("seat 14F")}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Ledger.Claim(ctx, spent.Claim{Namespace: "tickets", Key: "ticket-secret-2", Place: "gate-3", Result: []byte("seat 1A")}); err != nil {
		t.Fatal(err)
	}
	b := e.browser(t)
	tok := csrf(t, b.get("/ui/"))
	lookup := func(ns, key string) page {
		return b.post("/ui/lookup", url.Values{"csrf": {tok}, "namespace": {ns}, "key": {key}})
	}
	t.Run("Found", func(t *testing.T) {
		p := lookup("tickets", "ticket-1")
		wantPage(t, "lookup ticket-1", p, http.StatusOK, e.Ledger.HashKey("tickets", "ticket-1").String(), "complete", "gate-2", "8 bytes", "seat 14F")
		if strings.Contains(p.Body, "ticket-secret-2") || strings.Contains(p.Body, "seat 1A") {
			t.Fatalf("lookup of ticket-1 shows another key's record")
		}
	})
	t.Run("NotFound", func(t *testing.T) {
		wantPage(t, "lookup ticket-9", lookup("tickets", "ticket-9"), http.StatusOK, "No live record of this key")
	})
	t.Run("UnknownNamespace", func(t *testing.T) {
		wantPage(t, "lookup in nope", lookup("nope", "k"), http.StatusBadRequest, "unknown_namespace", "Choose a namespace")
	})
	t.Run("KeyTooLong", func(t *testing.T) {
		wantPage(t, "lookup of a 513-byte key", lookup("tickets", strings.Repeat("k", spent.MaxKeyLen+1)), http.StatusBadRequest, "key_too_long")
	})
	t.Run("LongResultPreview", func(t *testing.T) {
		if _, err := e.Ledger.Claim(ctx, spent.Claim{Namespace: "tickets", Key: "ticket-long", Result: []byte(strings.Repeat("é", 300))}); err != nil {
			t.Fatal(err)
		}
		p := lookup("tickets", "ticket-long")
		wantPage(t, "lookup ticket-long", p, http.StatusOK, "600 bytes", strings.Repeat("é", 128)+"</code>…")
	})
	t.Run("BinaryResultInHex", func(t *testing.T) {
		if _, err := e.Ledger.Claim(ctx, spent.Claim{Namespace: "tickets", Key: "ticket-bin", Result: []byte{0xff, 0x00, 0x10}}); err != nil {
			t.Fatal(err)
		}
		wantPage(t, "lookup ticket-bin", lookup("tickets", "ticket-bin"), http.StatusOK, "3 bytes (hex): <code>ff0010</code>")
	})
}

func TestLimits(t *testing.T) {
	e := MustOpen(t, tokens, func(c *console.Config) { c.MaxForm = 4096 })
	b := e.browser(t)
	tok := b.login(adminToken)
	t.Run("FormTooLarge", func(t *testing.T) {
		p := b.post("/ui/resolve", url.Values{"csrf": {tok}, "result": {strings.Repeat("r", 5000)}})
		wantPage(t, "5000-byte form", p, http.StatusRequestEntityTooLarge, "too_large", "4096 bytes")
	})
	t.Run("TokenTooLong", func(t *testing.T) {
		b := e.browser(t)
		lp := b.get("/ui/login")
		p := b.post("/ui/login", url.Values{"csrf": {csrf(t, lp)}, "token": {strings.Repeat("t", 3000)}})
		if p.Status != http.StatusUnauthorized {
			t.Fatalf("3000-byte token: got %d, want 401 (within the form limit, but unknown)", p.Status)
		}
	})
	t.Run("Sessions", func(t *testing.T) {
		e := MustOpen(t, tokens, func(c *console.Config) { c.MaxSessions = 2 })
		admin := e.browser(t)
		admin.login(adminToken)
		for range 5 { // visitors that never log in
			e.browser(t).get("/ui/login")
		}
		if p := admin.get("/ui/"); p.Status != http.StatusOK {
			t.Fatalf("admin after 5 anonymous visitors with room for 2 sessions: got %d, want 200 (anonymous sessions go first)", p.Status)
		}
	})
	t.Run("Config", func(t *testing.T) {
		for name, edit := range map[string]func(*console.Config){
			"NoLedger":    func(c *console.Config) { c.Ledger = nil },
			"SessionLife": func(c *console.Config) { c.SessionLife = 48 * time.Hour },
			"MaxForm":     func(c *console.Config) { c.MaxForm = 10 },
			"Window":      func(c *console.Config) { c.Window = time.Second },
			"ShortToken": func(c *console.Config) {
				c.Tokens = []sphttp.Token{{Token: "short", Scopes: []sphttp.Scope{sphttp.ScopeAdmin}}}
			},
			"UnknownNS": func(c *console.Config) {
				c.Tokens = []sphttp.Token{{Token: adminToken, Namespaces: []string{"nope"}, Scopes: []sphttp.Scope{sphttp.ScopeAdmin}}}
			},
			"NoSessions":       func(c *console.Config) { c.MaxSessions = 0 },
			"NoSampleInterval": func(c *console.Config) { c.SampleInterval = 0 },
		} {
			t.Run(name, func(t *testing.T) {
				cfg := console.DefaultConfig(e.Ledger)
				edit(&cfg)
				if _, err := console.New(cfg); err == nil {
					t.Fatalf("New: got nil error, want a refusal")
				}
			})
		}
	})
}

func TestCounts(t *testing.T) {
	e := MustOpen(t, nil, nil)
	b := e.browser(t)
	claim := func(ns, key string) {
		resp, err := http.Post(e.Srv.URL+"/v1/claim", "application/json", strings.NewReader(`{"namespace":"`+ns+`","key":"`+key+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("claim %s: got %d, want 200", key, resp.StatusCode)
		}
	}
	claim("tickets", "a")
	claim("tickets", "a")
	claim("tickets", "a")
	claim("tickets", "b")
	// A claim that does not come over HTTP (the RESP listener, Privacy
	// Pass and e-cash call the ledger as this does) counts too: the page
	// reads the ledger's counter, not one front end's.
	if _, err := e.Ledger.Claim(context.Background(), spent.Claim{Namespace: "tickets", Key: "c"}); err != nil {
		t.Fatal(err)
	}
	p := b.get("/ui/")
	// Two-step claims: fresh 3, replayed 0, in_progress 2 (the repeats of a
	// pending key), refused 0, mismatch 0, then unknown "–" (a retake
	// namespace has none).
	want := `<td class="num">3</td><td class="num">0</td><td class="num">2</td><td class="num">0</td><td class="num">0</td><td class="num">–</td>`
	wantPage(t, "counts", p, http.StatusOK, want)
}

func TestChart(t *testing.T) {
	e := MustOpen(t, nil, nil)
	// A console of its own, whose sampler the test runs on the real clock
	// (the sampler's instants must differ) over a counter it drives.
	reg := prometheus.NewRegistry()
	claims := prometheus.NewCounterVec(prometheus.CounterOpts{Name: node.MetricLedgerClaims, Help: "claims"}, []string{"namespace", "outcome"})
	reg.MustRegister(claims)
	cfg := console.DefaultConfig(e.Ledger)
	cfg.Gatherer = reg
	cfg.SampleInterval, cfg.Window = 10*time.Millisecond, time.Minute
	c, err := console.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.Run(ctx)
	srv := httptest.NewServer(c)
	defer srv.Close()
	b := (&env{Srv: srv}).browser(t)
	whole := func(outcome, page string) string {
		m := regexp.MustCompile(outcome + `</td><td class="num">[0-9.–]+</td><td class="num">([0-9.–]+)</td>`).FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("main page: no rate of %s claims in the rates table", outcome)
		}
		return m[1]
	}
	rising := func(rate string) bool { return rate != "0.00" && rate != "–" }
	deadline := time.Now().Add(30 * time.Second)
	for {
		claims.WithLabelValues("payments", "fresh").Add(5)
		claims.WithLabelValues("payments", "mismatch").Add(1)
		claims.WithLabelValues("tickets", "refused").Add(2)
		svg := b.get("/ui/chart.svg")
		if svg.Header.Get("Content-Type") != "image/svg+xml" {
			t.Fatalf("chart: got Content-Type %q, want image/svg+xml", svg.Header.Get("Content-Type"))
		}
		page := b.get("/ui/").Body
		fresh, refused := whole("fresh", page), whole("refused", page)
		if strings.Contains(svg.Body, `<polyline fill="none" stroke="#1b7f3b"`) && strings.Contains(svg.Body, `<polyline fill="none" stroke="#7b3fa0"`) &&
			rising(fresh) && rising(refused) {
			if !strings.HasPrefix(svg.Body, "<svg ") || !strings.HasSuffix(svg.Body, "</svg>") {
				t.Fatalf("chart: got %q, want one svg element", svg.Body)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("chart after 30s of claims: got\n%s\nand rates of fresh %s and refused %s, want lines of fresh and mismatch and both rates above 0", svg.Body, fresh, refused)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
