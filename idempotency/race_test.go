package idempotency_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spentledger/spent"
	sphttp "github.com/spentledger/spent/http"
	"github.com/spentledger/spent/idempotency"
	"github.com/spentledger/spent/pebble"
)

// openPebbleLedger opens a ledger with the middleware's namespaces on the
// embedded store in a temporary directory.
func openPebbleLedger(tb testing.TB, o idempotency.Options, lease time.Duration, now func() time.Time) *spent.Ledger {
	tb.Helper()
	store, err := pebble.Open(filepath.Join(tb.TempDir(), "ledger"), pebble.DefaultOptions())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { store.Close() })
	l, err := spent.NewLedger(context.Background(), store, ledgerConfig(o, lease, now))
	if err != nil {
		tb.Fatal(err)
	}
	return l
}

// TestRaceOfIdenticalRequests sends 100 identical requests at once: one runs
// the handler, every other one gets 409 in progress or the replay.
func TestRaceOfIdenticalRequests(t *testing.T) {
	o := testOptions()
	l := openPebbleLedger(t, o, 30*time.Second, time.Now)
	mw, err := idempotency.New(l, o)
	if err != nil {
		t.Fatal(err)
	}
	a := newApp()
	srv := httptest.NewServer(mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(20 * time.Millisecond) // a window for the others to arrive in
		a.ServeHTTP(w, r)
	})))
	defer srv.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: 100}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}

	const n = 100
	answers := make([]answer, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	var errs atomic.Int64
	for i := range n {
		wg.Go(func() {
			r, _ := http.NewRequest(http.MethodPost, srv.URL+"/things", bytes.NewReader([]byte(`{"amount":7}`)))
			r.Header.Set(idempotency.HeaderKey, `"race-1"`)
			r.Header.Set("X-Client", "alice")
			r.Header.Set("Content-Type", "application/json")
			<-start
			resp, err := hc.Do(r)
			if err != nil {
				errs.Add(1)
				return
			}
			defer resp.Body.Close()
			var buf bytes.Buffer
			buf.ReadFrom(resp.Body)
			answers[i] = answer{status: resp.StatusCode, header: resp.Header, body: buf.Bytes()}
		})
	}
	close(start)
	wg.Wait()
	if errs.Load() != 0 {
		t.Fatalf("%d requests failed", errs.Load())
	}
	var first *answer
	var fresh, replays, conflicts int
	for i := range answers {
		x := &answers[i]
		switch {
		case x.status == 201 && !x.replayed():
			fresh++
			first = x
		case x.status == 201:
			replays++
		case x.status == 409 && x.header.Get("Retry-After") != "":
			conflicts++
		default:
			t.Fatalf("answer %d: %d %s", i, x.status, x.body)
		}
	}
	if fresh != 1 || a.runs.Load() != 1 || a.effects.Load() != 1 {
		t.Fatalf("got %d fresh answers, %d runs, %d effects; want 1 of each", fresh, a.runs.Load(), a.effects.Load())
	}
	for i := range answers {
		if answers[i].status == 201 && !bytes.Equal(answers[i].body, first.body) {
			t.Fatalf("answer %d: %q, want the first body %q", i, answers[i].body, first.body)
		}
	}
	t.Logf("1 fresh, %d replays, %d in progress", replays, conflicts)
}

// TestOverRemoteLedger runs the middleware over the Go client of a spent
// server, as a service sharing one ledger with others would.
func TestOverRemoteLedger(t *testing.T) {
	o := testOptions()
	c := newClock()
	l := openPebbleLedger(t, o, testLease, c.Now)
	api, err := sphttp.NewServer(l, sphttp.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	spentSrv := httptest.NewServer(api)
	defer spentSrv.Close()
	o.Now = c.Now
	mw, err := idempotency.New(sphttp.NewClient(spentSrv.URL, sphttp.ClientConfig{}), o)
	if err != nil {
		t.Fatal(err)
	}
	a := newApp()
	srv := httptest.NewServer(mw.Handler(a))
	defer srv.Close()
	first := send(t, srv.URL, req{key: "r1", body: "x"})
	want{status: 201}.check(t, "first", first)
	again := send(t, srv.URL, req{key: "r1", body: "x"})
	want{status: 201, replayed: true}.check(t, "replay", again)
	if !bytes.Equal(first.body, again.body) {
		t.Fatalf("replay: got %q, want %q", again.body, first.body)
	}
	want{status: 422, code: idempotency.CodeMismatch}.check(t, "other body", send(t, srv.URL, req{key: "r1", body: "y"}))
	want{status: 500}.check(t, "failure before Applied", send(t, srv.URL, req{key: "r2", do: "fail-before"}))
	want{status: 201}.check(t, "retry", send(t, srv.URL, req{key: "r2"}))
	send(t, srv.URL, req{key: "r3", do: "panic-after"})
	c.Advance(testLease)
	want{status: 409, code: idempotency.CodeOutcomeUnknown}.check(t, "unknown", send(t, srv.URL, req{key: "r3"}))
	if a.effects.Load() != 3 {
		t.Fatalf("effects: got %d, want 3", a.effects.Load())
	}
}
