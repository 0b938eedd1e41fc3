package idempotency_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/idempotency"
	"github.com/spentledger/spent/inmem"
	"github.com/spentledger/spent/pebble"
)

// BenchmarkDoNothing measures requests/s of a handler that does nothing,
// bare and under the middleware on the embedded pebble store, in the same
// run: real loopback TCP, benchWorkers clients in this process (64, or
// $IDEMPOTENCY_BENCH_WORKERS), each request with a fresh key. "Middleware"
// claims the key and stores the answer (two durable writes, each in its own
// store round: Ledger.Complete with the claim's seq goes straight to the
// store); "MiddlewareApplied" also calls Applied (four writes); both report
// rounds/req, the embedded store's group commits per request.
// "MiddlewareInmem" runs the middleware over the in-memory store: the cost
// of the middleware's own work, without a durable write to wait for.
//
//	go test ./idempotency -run '^$' -bench DoNothing -benchtime 4s -count 2
//	IDEMPOTENCY_BENCH_WORKERS=256 go test ./idempotency -run '^$' -bench DoNothing -benchtime 4s -count 2
func BenchmarkDoNothing(b *testing.B) {
	nothing := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	applied := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { idempotency.Applied(r) })
	o := idempotency.DefaultOptions()
	o.Scope = idempotency.FixedScope("bench")
	b.Run("Bare", func(b *testing.B) { benchServe(b, nothing) })
	pebbleLedger := func(b *testing.B) *spent.Ledger { return openPebbleLedger(b, o, 30*time.Second, time.Now) }
	// serve runs h under the middleware on the ledger open makes, and
	// reports the embedded store's rounds per request where there is one.
	serve := func(open func(*testing.B) *spent.Ledger, h http.Handler) func(*testing.B) {
		return func(b *testing.B) {
			l := open(b)
			mw, err := idempotency.New(l, o)
			if err != nil {
				b.Fatal(err)
			}
			benchServe(b, mw.Handler(h))
			if st, ok := l.Store().(*pebble.Store); ok {
				b.ReportMetric(float64(st.Stats().Rounds)/float64(b.N), "rounds/req")
			}
		}
	}
	b.Run("Middleware", serve(pebbleLedger, nothing))
	// The middleware over the in-memory store, which keeps nothing across a
	// crash: what the middleware's own work and the extra HTTP cost, with
	// no durable store round to wait for. Not a configuration to run.
	b.Run("MiddlewareInmem", serve(func(b *testing.B) *spent.Ledger {
		l, err := spent.NewLedger(context.Background(), inmem.New(), ledgerConfig(o, 30*time.Second, time.Now))
		if err != nil {
			b.Fatal(err)
		}
		return l
	}, nothing))
	b.Run("MiddlewareApplied", serve(pebbleLedger, applied))
}

var benchWorkers = 64

var benchRun atomic.Int64

func benchServe(b *testing.B, h http.Handler) {
	srv := httptest.NewServer(h)
	defer srv.Close()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = benchWorkers, benchWorkers
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	prefix := "bench-" + strconv.FormatInt(benchRun.Add(1), 10) + "-"
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	b.ResetTimer()
	for range benchWorkers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				r, _ := http.NewRequest(http.MethodPost, srv.URL+"/things", strings.NewReader(`{"amount":1}`))
				r.Header.Set(idempotency.HeaderKey, prefix+strconv.FormatInt(i, 10))
				r.Header.Set("Content-Type", "application/json")
				resp, err := hc.Do(r)
				if err != nil {
					failed.Store(err.Error())
					next.Store(int64(b.N))
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || resp.Header.Get(idempotency.HeaderReplayed) != "" {
					failed.Store("status " + resp.Status)
					next.Store(int64(b.N))
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if f := failed.Load(); f != nil {
		b.Fatal(f)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}

// init reads the benchmark's concurrency from the environment.
func init() {
	if v, err := strconv.Atoi(os.Getenv("IDEMPOTENCY_BENCH_WORKERS")); err == nil && v > 0 {
		benchWorkers = v
	}
}
