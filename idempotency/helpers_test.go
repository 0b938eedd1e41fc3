package idempotency_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/idempotency"
	"github.com/spentledger/spent/inmem"
)

// clock is a fake clock shared by the ledger and the middleware.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

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

// testLease is the lease of both namespaces in the tests.
const testLease = 10 * time.Second

// testOptions are the middleware options of the tests: scoped by the
// X-Client header, as an API key would be.
func testOptions() idempotency.Options {
	o := idempotency.DefaultOptions()
	o.Scope = func(r *http.Request) (string, error) {
		c := r.Header.Get("X-Client")
		if c == "" {
			return "", idempotency.ErrNoScope
		}
		return c, nil
	}
	o.MaxBody = 1024
	o.MaxResponse = 4096
	return o
}

// ledgerConfig builds a ledger configuration with the middleware's
// namespaces (leases of lease) and the clock now.
func ledgerConfig(o idempotency.Options, lease time.Duration, now func() time.Time) spent.Config {
	cfg := spent.DefaultConfig()
	cfg.Secret = bytes.Repeat([]byte("k"), 32)
	cfg.Namespaces = idempotency.Policies(o, lease)
	cfg.Now = now
	return cfg
}

// env is a service under the middleware on an in-memory ledger with a fake
// clock, served over loopback.
type env struct {
	t      *testing.T
	clock  *clock
	store  *inmem.Store
	ledger *spent.Ledger
	mw     *idempotency.Middleware
	srv    *httptest.Server
	app    *app
}

func newEnv(t *testing.T, mod func(*idempotency.Options)) *env {
	t.Helper()
	return newEnvWrapped(t, mod, nil)
}

// newEnvWrapped is newEnv with the ledger on wrap(store) instead of the
// in-memory store itself, when wrap is not nil.
func newEnvWrapped(t *testing.T, mod func(*idempotency.Options), wrap func(spent.Store) spent.Store) *env {
	t.Helper()
	e := &env{t: t, clock: newClock(), store: inmem.New(), app: newApp()}
	o := testOptions()
	if mod != nil {
		mod(&o)
	}
	var st spent.Store = e.store
	if wrap != nil {
		st = wrap(e.store)
	}
	l, err := spent.NewLedger(context.Background(), st, ledgerConfig(o, testLease, e.clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	e.ledger = l
	e.mw, err = idempotency.New(l, o)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/", e.mw.Handler(e.app))
	e.srv = httptest.NewServer(mux)
	t.Cleanup(e.srv.Close)
	return e
}

// app is the handler under test. The X-Do request header says what it does
// (it is not part of the fingerprint, so a retry may change it):
//
//	ok (default)  Applied, then 201 with Location, X-Extra and a fresh nonce
//	noapply       200 without calling Applied
//	fail-before   500 before Applied
//	429-before    429 before Applied
//	panic-before  panic before Applied
//	fail-first    500 before Applied on the app's first run, then as ok
//	fail-after    Applied, then 500
//	panic-after   Applied, then panic
//	block         wait for release, then as ok
//	big           Applied, then a body over MaxResponse
//	empty         Applied, then 204
type app struct {
	runs     atomic.Int64 // handler entries
	effects  atomic.Int64 // effects made (after a nil Applied)
	refusals atomic.Int64 // Applied errors
	block    chan struct{}
	entered  chan struct{}
	mu       sync.Mutex
	lastErr  error
}

func newApp() *app { return &app{block: make(chan struct{}), entered: make(chan struct{}, 1000)} }

func (a *app) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.runs.Add(1)
	body, _ := io.ReadAll(r.Body)
	do := r.Header.Get("X-Do")
	switch do {
	case "noapply":
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "no effect %s", nonce())
		return
	case "fail-before":
		http.Error(w, "failed before", http.StatusInternalServerError)
		return
	case "429-before":
		http.Error(w, "slow down", http.StatusTooManyRequests)
		return
	case "panic-before":
		panic(http.ErrAbortHandler)
	case "fail-first":
		if a.runs.Load() == 1 {
			http.Error(w, "failed before", http.StatusInternalServerError)
			return
		}
	case "block":
		a.entered <- struct{}{}
		<-a.block
	}
	if err := idempotency.Applied(r); err != nil {
		a.refusals.Add(1)
		a.mu.Lock()
		a.lastErr = err
		a.mu.Unlock()
		w.WriteHeader(http.StatusTeapot) // discarded by the middleware
		return
	}
	a.effects.Add(1)
	switch do {
	case "block-after":
		a.entered <- struct{}{}
		<-a.block
	case "fail-after":
		http.Error(w, "failed after the effect", http.StatusInternalServerError)
		return
	case "panic-after":
		panic(http.ErrAbortHandler)
	case "big":
		w.Write(bytes.Repeat([]byte("x"), 5000))
		return
	case "empty":
		w.WriteHeader(http.StatusNoContent)
		return
	}
	k, _ := idempotency.KeyOf(r)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", "/things/"+k.Key)
	w.Header().Set("X-Extra", "first-only")
	w.WriteHeader(http.StatusCreated)
	json.NewEncoder(w).Encode(map[string]any{"nonce": nonce(), "body": string(body), "seq": k.AppliedSeq.String()})
}

func (a *app) err() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lastErr
}

func nonce() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// answer is a response read whole.
type answer struct {
	status int
	header http.Header
	body   []byte
	code   string // problem code, if a problem document
	err    error  // transport error
}

func (a answer) replayed() bool { return a.header.Get(idempotency.HeaderReplayed) == "true" }

// req describes a request of the tests.
type req struct {
	method string // default POST
	path   string // default /things
	key    string // the raw header value; "" sends none
	client string // X-Client; default "alice"
	body   string
	do     string // X-Do
	header map[string]string
}

func (e *env) send(q req) answer {
	e.t.Helper()
	return send(e.t, e.srv.URL, q)
}

func send(t testing.TB, base string, q req) answer {
	t.Helper()
	if q.method == "" {
		q.method = http.MethodPost
	}
	if q.path == "" {
		q.path = "/things"
	}
	if q.client == "" {
		q.client = "alice"
	}
	r, err := http.NewRequest(q.method, base+q.path, strings.NewReader(q.body))
	if err != nil {
		t.Fatal(err)
	}
	if q.key != "" {
		r.Header.Set(idempotency.HeaderKey, q.key)
	}
	if q.client != "-" {
		r.Header.Set("X-Client", q.client)
	}
	if q.do != "" {
		r.Header.Set("X-Do", q.do)
	}
	r.Header.Set("Content-Type", "application/json")
	for k, v := range q.header {
		if v == "" {
			r.Header.Del(k)
		} else {
			r.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{err: err}
	}
	a := answer{status: resp.StatusCode, header: resp.Header, body: b}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
		var p struct {
			Code   string `json:"code"`
			Status int    `json:"status"`
			Type   string `json:"type"`
		}
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatalf("problem document %q: %v", b, err)
		}
		if p.Status != resp.StatusCode || p.Type != idempotency.ProblemType+p.Code {
			t.Fatalf("problem document %q: status or type disagree with %d", b, resp.StatusCode)
		}
		a.code = p.Code
	}
	return a
}
