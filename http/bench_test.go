package http_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/spentledger/spent"
	sphttp "github.com/spentledger/spent/http"
	"github.com/spentledger/spent/inmem"
	"github.com/spentledger/spent/pebble"
)

// The benchmarks run a server and its clients in one process over real
// loopback TCP, with as many connections as workers. Compare the claims/s
// of BenchmarkClaimHTTP and BenchmarkClaimsBatchHTTP with those of
// BenchmarkBareHandler, which puts the same requests through the same client
// to a handler that only reads the body and writes a fixed answer: the gap
// is what the ledger, the store and the JSON handling cost.
//
//	go test -run '^$' -bench . -benchtime 5s ./http

const (
	singleWorkers = 64
	batchWorkers  = 16
	batchSize     = 100
)

// benchStore names a store the benchmarks run over.
type benchStore struct {
	name string
	open func(tb testing.TB) spent.Store
}

func benchStores() []benchStore {
	return []benchStore{
		{"inmem", func(testing.TB) spent.Store { return inmem.New() }},
		{"pebble", func(tb testing.TB) spent.Store {
			s, err := pebble.Open(tb.TempDir(), pebble.DefaultOptions())
			if err != nil {
				tb.Fatal(err)
			}
			return s
		}},
	}
}

// benchClient is a client with a connection pool as large as the workers.
func benchClient(url string, workers int) *sphttp.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = workers
	tr.MaxIdleConnsPerHost = workers
	return sphttp.NewClient(url, sphttp.ClientConfig{HTTPClient: &http.Client{Transport: tr}})
}

// serveLedger serves a fresh ledger over store on loopback TCP.
func serveLedger(tb testing.TB, store spent.Store) string {
	tb.Helper()
	cfg := spent.DefaultConfig()
	cfg.Secret = bytes.Repeat([]byte("b"), 32)
	l, err := spent.NewLedger(context.Background(), store, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	srv, err := sphttp.NewServer(l, sphttp.DefaultConfig())
	if err != nil {
		tb.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	tb.Cleanup(func() {
		ts.Close()
		store.Close()
	})
	return ts.URL
}

// run calls op(i) for i in [0, b.N) from workers goroutines and stops the
// benchmark on the first error.
func run(b *testing.B, workers int, op func(i int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	b.ResetTimer()
	for range workers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				if err := op(int(i)); err != nil {
					once.Do(func() { first = err })
					next.Store(int64(b.N))
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if first != nil {
		b.Fatal(first)
	}
}

var benchFingerprint = sha256.Sum256([]byte("benchmark request"))

var runID atomic.Int64

// benchClaim is the claim of the i-th key of a run: two-step, with a
// fingerprint and a place, as a payment API would send it.
func benchClaim(run int64, i int) spent.Claim {
	return spent.Claim{
		Namespace:   "default",
		Key:         "bench-" + strconv.FormatInt(run, 10) + "-" + strconv.Itoa(i),
		Fingerprint: benchFingerprint[:],
		Place:       "bench",
	}
}

func claimsPerSecond(b *testing.B, perOp int) {
	b.ReportMetric(float64(b.N)*float64(perOp)/b.Elapsed().Seconds(), "claims/s")
}

// benchSingle runs single claims through c, failing on anything but fresh.
func benchSingle(b *testing.B, c *sphttp.Client) {
	ctx := context.Background()
	id := runID.Add(1)
	run(b, singleWorkers, func(i int) error {
		res, err := c.Claim(ctx, benchClaim(id, i))
		if err == nil && res.Outcome != spent.Fresh {
			b.Errorf("claim %d: got %s, want fresh", i, res.Outcome)
		}
		return err
	})
	claimsPerSecond(b, 1)
}

// benchBatch runs batches of batchSize claims through c.
func benchBatch(b *testing.B, c *sphttp.Client) {
	ctx := context.Background()
	id := runID.Add(1)
	run(b, batchWorkers, func(i int) error {
		cs := make([]spent.Claim, batchSize)
		for j := range cs {
			cs[j] = benchClaim(id, i*batchSize+j)
		}
		res, err := c.ClaimBatch(ctx, cs)
		if err == nil && res[batchSize-1].Outcome != spent.Fresh {
			b.Errorf("batch %d: got %s, want fresh", i, res[batchSize-1].Outcome)
		}
		return err
	})
	claimsPerSecond(b, batchSize)
}

// BenchmarkClaimHTTP measures single claims from 64 concurrent clients.
func BenchmarkClaimHTTP(b *testing.B) {
	for _, st := range benchStores() {
		b.Run(st.name, func(b *testing.B) {
			benchSingle(b, benchClient(serveLedger(b, st.open(b)), singleWorkers))
		})
	}
}

// BenchmarkClaimsBatchHTTP measures batches of 100 claims from 16 concurrent
// clients.
func BenchmarkClaimsBatchHTTP(b *testing.B) {
	for _, st := range benchStores() {
		b.Run(st.name, func(b *testing.B) {
			benchBatch(b, benchClient(serveLedger(b, st.open(b)), batchWorkers))
		})
	}
}

// bareAnswer is a fixed claim answer, as the server would write it.
const bareAnswer = `{"outcome":"fresh","namespace":"default","hash":"0f1e2d3c4b5a69788796a5b4c3d2e1f0",` +
	`"state":"pending","first_seen":"2025-03-01T12:00:00.123456789Z","place":"bench",` +
	`"fingerprint":"5b1f4f0f2b0b8f1c3c1d2e3f405162738495a6b7c8d9eaf00112233445566778",` +
	`"expires_at":"2025-03-02T12:00:00.123456789Z","lease_until":"2025-03-01T12:00:30.123456789Z","seq":"1:123456"}`

// bareHandler reads the body and writes a fixed answer of the right shape.
func bareHandler(answer []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
		w.Write(answer)
	})
}

// BenchmarkBareHandler sends the requests of BenchmarkClaimHTTP and
// BenchmarkClaimsBatchHTTP, through the same client, to a handler that does
// no work: the ceiling of HTTP on this machine.
func BenchmarkBareHandler(b *testing.B) {
	b.Run("single", func(b *testing.B) {
		ts := httptest.NewServer(bareHandler([]byte(bareAnswer + "\n")))
		defer ts.Close()
		benchSingle(b, benchClient(ts.URL, singleWorkers))
	})
	b.Run("batch", func(b *testing.B) {
		var buf bytes.Buffer
		buf.WriteString(`{"results":[`)
		for i := range batchSize {
			if i > 0 {
				buf.WriteByte(',')
			}
			buf.WriteString(bareAnswer)
		}
		buf.WriteString("]}\n")
		ts := httptest.NewServer(bareHandler(buf.Bytes()))
		defer ts.Close()
		benchBatch(b, benchClient(ts.URL, batchWorkers))
	})
}

// BenchmarkInstrumentOuter measures what InstrumentOuter, which spent serve
// puts in front of everything, adds to a request that a handler in front
// answers itself (the case it counts): the bare handler alone, and behind
// InstrumentOuter, side by side, in process with no network.
//
//	go test ./http -run '^$' -bench InstrumentOuter -count 3
func BenchmarkInstrumentOuter(b *testing.B) {
	s := MustServe(b, sphttp.DefaultConfig()).server
	h := bareHandler([]byte(bareAnswer + "\n"))
	for _, c := range []struct {
		name string
		h    http.Handler
	}{{"bare", h}, {"outer", s.InstrumentOuter(nil, h)}} {
		b.Run(c.name, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodPost, "/v1/claim", nil)
			b.ReportAllocs()
			for b.Loop() {
				c.h.ServeHTTP(httptest.NewRecorder(), req)
			}
		})
	}
}
