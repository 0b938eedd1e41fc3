package http_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/door"
	sphttp "github.com/spentledger/spent/http"
	"github.com/spentledger/spent/inmem"
)

// Tokens used by the tests.
const (
	tokClaim      = "claim-token-0123456789"  // claim scope, all namespaces
	tokAdmin      = "admin-token-0123456789"  // admin scope, all namespaces
	tokEchoOnly   = "echo-only-token-012345"  // claim scope, namespace echo
	tokEchoAdmin  = "echo-admin-token-01234"  // admin scope, namespace echo
	tokRefuseOnly = "refuse-only-token-01234" // claim scope, namespace refuse
)

var testTokens = []sphttp.Token{
	{Token: tokClaim, Scopes: []sphttp.Scope{sphttp.ScopeClaim}},
	{Token: tokAdmin, Scopes: []sphttp.Scope{sphttp.ScopeAdmin}},
	{Token: tokEchoOnly, Namespaces: []string{"echo"}, Scopes: []sphttp.Scope{sphttp.ScopeClaim}},
	{Token: tokEchoAdmin, Namespaces: []string{"echo"}, Scopes: []sphttp.Scope{sphttp.ScopeAdmin}},
	{Token: tokRefuseOnly, Namespaces: []string{"refuse"}, Scopes: []sphttp.Scope{sphttp.ScopeClaim}},
}

// clock is a fake clock for the ledger.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock {
	return &clock{now: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// testPolicies are the namespaces of the test ledgers.
func testPolicies() map[string]spent.Policy {
	echo := spent.DefaultPolicy()
	refuse := spent.Policy{Mode: spent.ModeRefuse, Retention: time.Hour, Lease: 10 * time.Second, OnLeaseExpiry: spent.LeaseExpiryRetake}
	retake := spent.DefaultPolicy()
	retake.OnLeaseExpiry = spent.LeaseExpiryRetake
	raw := spent.DefaultPolicy()
	raw.StoreRawKey = true
	return map[string]spent.Policy{
		"default": spent.DefaultPolicy(),
		"echo":    echo,
		"refuse":  refuse,
		"retake":  retake,
		"raw":     raw,
	}
}

func ledgerConfig(now func() time.Time) spent.Config {
	cfg := spent.DefaultConfig()
	cfg.Secret = bytes.Repeat([]byte("s"), 32)
	cfg.Namespaces = testPolicies()
	cfg.Now = now
	return cfg
}

// env is a ledger over an inmem store, served over loopback TCP.
type env struct {
	store  *inmem.Store
	ledger *spent.Ledger
	clock  *clock
	server *sphttp.Server
	url    string
}

// MustServe starts a server with cfg over a fresh inmem ledger with a fake
// clock, and stops it when the test ends.
func MustServe(tb testing.TB, cfg sphttp.Config) *env {
	tb.Helper()
	return MustServeStore(tb, cfg, nil)
}

// MustServeStore is MustServe over store (nil: a fresh inmem store).
func MustServeStore(tb testing.TB, cfg sphttp.Config, store spent.Store) *env {
	tb.Helper()
	e := newEnv(tb, cfg, store)
	e.serve(tb, e.server, nil)
	return e
}

// newEnv returns an env whose server, made with cfg over a ledger on store
// (nil: a fresh inmem store), is not yet served.
func newEnv(tb testing.TB, cfg sphttp.Config, store spent.Store) *env {
	tb.Helper()
	e := &env{clock: newClock()}
	if store == nil {
		e.store = inmem.New()
		store = e.store
	}
	l, err := spent.NewLedger(context.Background(), store, ledgerConfig(e.clock.Now))
	if err != nil {
		tb.Fatal(err)
	}
	e.ledger = l
	e.server, err = sphttp.NewServer(l, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

// serve serves h on a loopback port, behind cs's admission
// (door.Conns.Serve) when cs is not nil, until the test ends.
func (e *env) serve(tb testing.TB, h http.Handler, cs *door.Conns) *httptest.Server {
	tb.Helper()
	ts := httptest.NewUnstartedServer(h)
	if cs != nil {
		cs.Serve(ts.Config)
	}
	ts.Start()
	tb.Cleanup(ts.Close)
	e.url = ts.URL
	return ts
}

// authConfig is a server config with the test tokens.
func authConfig() sphttp.Config {
	cfg := sphttp.DefaultConfig()
	cfg.Tokens = testTokens
	return cfg
}

// answer is a raw HTTP answer.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// json decodes the body into a generic map, failing the test on error.
func (a *answer) json(tb testing.TB) map[string]any {
	tb.Helper()
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(a.body))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		tb.Fatalf("answer %d %q: %v", a.status, a.body, err)
	}
	return m
}

// request sends a raw request. Headers are given as name, value pairs.
func request(tb testing.TB, method, url string, body io.Reader, headers ...string) *answer {
	tb.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		tb.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Host" {
			req.Host = headers[i+1] // the client sends req.Host, not the header
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return &answer{status: resp.StatusCode, header: resp.Header, body: b}
}

// post sends body as JSON to path with the bearer token (none when empty).
func (e *env) post(tb testing.TB, path, token, body string) *answer {
	tb.Helper()
	h := []string{"Content-Type", "application/json"}
	if token != "" {
		h = append(h, "Authorization", "Bearer "+token)
	}
	return request(tb, http.MethodPost, e.url+path, strings.NewReader(body), h...)
}

// wantProblem checks that a is a problem document with the given status and
// code, and returns it.
func wantProblem(tb testing.TB, a *answer, status int, code string) map[string]any {
	tb.Helper()
	if a.status != status {
		tb.Fatalf("status: got %d, want %d (body %s)", a.status, status, a.body)
	}
	if ct := a.header.Get("Content-Type"); ct != "application/problem+json" {
		tb.Fatalf("Content-Type: got %q, want application/problem+json", ct)
	}
	p := a.json(tb)
	if p["code"] != code {
		tb.Fatalf("code: got %v, want %s (body %s)", p["code"], code, a.body)
	}
	for _, k := range []string{"type", "title", "status", "detail", "code"} {
		if _, ok := p[k]; !ok {
			tb.Fatalf("problem lacks %q: %s", k, a.body)
		}
	}
	if p["type"] != sphttp.ProblemType+code {
		tb.Fatalf("type: got %v, want %s", p["type"], sphttp.ProblemType+code)
	}
	if n, _ := p["status"].(json.Number).Int64(); int(n) != status {
		tb.Fatalf("status member: got %v, want %d", p["status"], status)
	}
	return p
}

// wantOK checks a 200 JSON answer and returns it decoded.
func wantOK(tb testing.TB, a *answer) map[string]any {
	tb.Helper()
	if a.status != http.StatusOK {
		tb.Fatalf("status: got %d, want 200 (body %s)", a.status, a.body)
	}
	if ct := a.header.Get("Content-Type"); ct != "application/json" {
		tb.Fatalf("Content-Type: got %q, want application/json", ct)
	}
	return a.json(tb)
}
