package idempotency_test

import (
	"context"
	"crypto/sha256"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pdb "github.com/cockroachdb/pebble/v2"
	"github.com/spentledger/spent"
	"github.com/spentledger/spent/idempotency"
	"github.com/spentledger/spent/inmem"
	"github.com/spentledger/spent/internal/barepebble"
	"github.com/spentledger/spent/internal/cputime"
	"github.com/spentledger/spent/pebble"
)

// BenchmarkDoNothing measures requests/s of a handler that does nothing,
// bare and under the middleware, in the same run: real loopback TCP, with 64
// and with 256 clients in this process (or only $IDEMPOTENCY_BENCH_WORKERS),
// each request with a fresh key. The cases take turns: each serves b.N/8
// requests, then the next, eight times over, so that a machine whose speed
// drifts during the run (these are shared) slows them alike. It reports each
// case's requests/s and, for every case but the bare one, that rate as a
// fraction of the bare rate ("-of-bare"). It also reports each case's process CPU
// time per request ("-cpu-us/req") and the share of the GOMAXPROCS cores
// the process kept busy while the case ran ("-busy"), so that a ratio can be
// read as the two causes it is made of: the CPU each request costs, and the
// CPU the case leaves idle while it waits (for its WAL syncs, say):
//
//	go test ./idempotency -run '^$' -bench DoNothing -benchtime 40000x -count 3
//
// The cases:
//   - "bare": the handler alone.
//   - "mw": the middleware on the embedded pebble store. It claims the key
//     early (spent.Claim.Early: answered when decided and held in memory,
//     written only with the answer) and stores the answer: one durable
//     write and one round to wait for per request. "mw-rounds/req" is the
//     store's group commits per request.
//   - "inmem": the middleware over the in-memory store, which keeps nothing
//     across a crash (not a configuration to run): the middleware's own
//     cost, with no durable round to wait for.
//   - "applied": the middleware on pebble with a handler that calls Applied,
//     whose marker must be durable before the handler goes on.
//   - "durable": no middleware; the handler makes the one durable write the
//     middleware cannot do without, and nothing else: it sets the SHA-256 of
//     the request's key to a 96-byte value in a bare Pebble database, synced
//     (pebble.Sync; Pebble's commit pipeline groups concurrent syncs), then
//     answers. Its "-of-bare" is what that write alone costs a handler that
//     does nothing, with Pebble's own group commit; mw's rate over its rate
//     is reported as "mw-of-durable".
func BenchmarkDoNothing(b *testing.B) {
	nothing := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	durable := func(db *pdb.DB) http.Handler {
		value := make([]byte, 96)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			k := sha256.Sum256([]byte(r.Header.Get(idempotency.HeaderKey)))
			if err := db.Set(k[:], value, pdb.Sync); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
			}
		})
	}
	applied := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { idempotency.Applied(r) })
	o := idempotency.DefaultOptions()
	o.Scope = idempotency.FixedScope("bench")
	levels := []int{64, 256}
	if benchWorkers > 0 {
		levels = []int{benchWorkers}
	}
	for _, clients := range levels {
		b.Run("Clients"+strconv.Itoa(clients), func(b *testing.B) {
			mw := func(l *spent.Ledger, h http.Handler) http.Handler {
				m, err := idempotency.New(l, o)
				if err != nil {
					b.Fatal(err)
				}
				return m.Handler(h)
			}
			onPebble := openPebbleLedger(b, o, 30*time.Second, time.Now)
			onInmem, err := spent.NewLedger(context.Background(), inmem.New(), ledgerConfig(o, 30*time.Second, time.Now))
			if err != nil {
				b.Fatal(err)
			}
			appliedPebble := openPebbleLedger(b, o, 30*time.Second, time.Now)
			cases := []*benchCase{
				newBenchCase(b, "bare", clients, nothing),
				newBenchCase(b, "durable", clients, durable(barepebble.Open(b))),
				newBenchCase(b, "mw", clients, mw(onPebble, nothing)),
				newBenchCase(b, "inmem", clients, mw(onInmem, nothing)),
				newBenchCase(b, "applied", clients, mw(appliedPebble, applied)),
			}
			if benchOnly != "" {
				// One case alone, for measuring its CPU use (see init).
				cases = slices.DeleteFunc(cases, func(c *benchCase) bool { return c.name != benchOnly })
				if len(cases) == 0 {
					b.Fatalf("IDEMPOTENCY_BENCH_CASE=%s: no such case", benchOnly)
				}
			}
			const turns = 8
			b.ResetTimer()
			for turn := range turns {
				n := b.N/turns + b.N%turns*min(1, turn/(turns-1))
				for _, c := range cases {
					c.run(b, n)
				}
			}
			b.StopTimer()
			bare, durableRate := 0.0, 0.0
			for _, c := range cases {
				rate := float64(b.N) / c.took.Seconds()
				b.ReportMetric(rate, c.name+"-req/s")
				b.ReportMetric(float64(c.cpu.Microseconds())/float64(b.N), c.name+"-cpu-us/req")
				b.ReportMetric(c.cpu.Seconds()/c.took.Seconds()/float64(runtime.GOMAXPROCS(0)), c.name+"-busy")
				switch {
				case c.name == "bare":
					bare = rate
				case bare > 0:
					b.ReportMetric(rate/bare, c.name+"-of-bare")
				}
				switch {
				case c.name == "durable":
					durableRate = rate
				case c.name == "mw" && durableRate > 0:
					b.ReportMetric(rate/durableRate, "mw-of-durable")
				}
			}
			for _, c := range []struct {
				name string
				l    *spent.Ledger
			}{{"mw", onPebble}, {"applied", appliedPebble}} {
				if rounds := c.l.Store().(*pebble.Store).Stats().Rounds; rounds > 1 {
					b.ReportMetric(float64(rounds)/float64(b.N), c.name+"-rounds/req")
				}
			}
		})
	}
}

// benchWorkers, when set, is the only client count BenchmarkDoNothing runs;
// benchOnly, when set, the only case.
var (
	benchWorkers int
	benchOnly    string
)

var benchRun atomic.Int64

// benchCase is one server of BenchmarkDoNothing and its clients.
type benchCase struct {
	name    string
	clients int
	url     string
	hc      *http.Client
	prefix  string
	next    int64         // keys used so far
	took    time.Duration // serving its requests, all turns
	cpu     time.Duration // the process's CPU time meanwhile
}

func newBenchCase(b *testing.B, name string, clients int, h http.Handler) *benchCase {
	srv := httptest.NewServer(h)
	b.Cleanup(srv.Close)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = clients, clients
	b.Cleanup(tr.CloseIdleConnections)
	return &benchCase{
		name: name, clients: clients, url: srv.URL + "/things",
		hc:     &http.Client{Transport: tr},
		prefix: "bench-" + strconv.FormatInt(benchRun.Add(1), 10) + "-",
	}
}

// run sends n requests from c.clients goroutines and adds the time they
// took to c.took.
func (c *benchCase) run(b *testing.B, n int) {
	var next atomic.Int64
	next.Store(c.next)
	end := c.next + int64(n)
	var wg sync.WaitGroup
	var failed atomic.Value
	cpu0 := cputime.Used()
	start := time.Now()
	for range c.clients {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= end {
					return
				}
				r, _ := http.NewRequest(http.MethodPost, c.url, strings.NewReader(`{"amount":1}`))
				r.Header.Set(idempotency.HeaderKey, c.prefix+strconv.FormatInt(i, 10))
				r.Header.Set("Content-Type", "application/json")
				resp, err := c.hc.Do(r)
				if err != nil {
					failed.Store(err.Error())
					next.Store(end)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || resp.Header.Get(idempotency.HeaderReplayed) != "" {
					failed.Store("status " + resp.Status)
					next.Store(end)
					return
				}
			}
		})
	}
	wg.Wait()
	c.took += time.Since(start)
	c.cpu += cputime.Used() - cpu0
	c.next = end
	if f := failed.Load(); f != nil {
		b.Fatal(c.name + ": " + f.(string))
	}
}

// init reads the benchmark's concurrency, and the one case to run, from the
// environment. A case alone serves b.N requests in the same eight turns, so
// that /usr/bin/time can give the process's CPU use per request:
//
//	go test -c -o /tmp/idem.test ./idempotency && cd idempotency
//	IDEMPOTENCY_BENCH_WORKERS=64 IDEMPOTENCY_BENCH_CASE=mw /usr/bin/time \
//		/tmp/idem.test -test.run '^$' -test.bench DoNothing -test.benchtime 100000x
func init() {
	if v, err := strconv.Atoi(os.Getenv("IDEMPOTENCY_BENCH_WORKERS")); err == nil && v > 0 {
		benchWorkers = v
	}
	benchOnly = os.Getenv("IDEMPOTENCY_BENCH_CASE")
}
