package main

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/pebble"
)

// benchConfig is what the bench command was asked to do.
type benchConfig struct {
	client      clientFlags
	embedded    bool
	data        string
	concurrency int
	duration    time.Duration
	batch       int
	keys        int
	repeat      float64
	resultSize  int
	rate        float64
	// soak, interval and mix select and shape the soak (see soak.go).
	soak     bool
	interval time.Duration
	mix      string
}

// benchCommand is "spent bench": claim load against a server or an embedded
// store, or with --soak a long mixed run against a server (soak.go).
func (m *Main) benchCommand() *cobra.Command {
	var bc benchConfig
	c := &cobra.Command{
		Use:   "bench [flags]",
		Short: "Generate claim load against a server or an embedded store and report claims/s and latency",
		Long: `Generate claim load and report throughput, latency percentiles and outcomes.

The load goes to a server (--addr, through the HTTP client) or, with
--embedded, to a ledger in this process over a pebble store opened in --data
(default: a temporary directory, removed afterwards). Each of --concurrency
workers sends one-step claims (a result of --result-size bytes), --batch claims
per request, until --duration has passed.

Keys: with --keys 0 every claim takes a key never used before (fresh); with
--keys N the claims cycle through N keys, so after the first N claims every
claim repeats one. Independently, a --repeat share of the claims reuses a key
this worker claimed before (replayed). Keys carry a per-run random prefix, so
two runs never share keys.

A progress line goes to stderr once a second. At the end a table (or, with
--json, one JSON object) gives claims/s, p50/p99/p99.9 and max latency per
request, counts per outcome and errors. Latencies come from an HDR-style
log-linear histogram (under 0.8% relative error).

With --soak the command drives a server (--addr) for a long run instead:
a mix of one-step claims of new keys, repeats of earlier keys, two-step
claims then completed, released or left pending until their lease runs
out (--mix), at --rate requests/s (default 2000 with --soak) for --duration
(default 30m with --soak). Every --interval it prints one row: requests and
errors in the interval, their p50 and p99 latency, and, read from the
server's /metrics, its own p99 time per claim, its RSS, Go heap, goroutines,
records held and records expired.
At the end it prints the operations and outcomes counted and the rows as a
markdown table, and exits 1 if any request failed or was answered wrongly
(a new key not fresh, a replay of other bytes than stored), or if /metrics
could not be read. bench/soak.sh runs it against a server whose records expire within
minutes, so that the record count levels off.`,
		Example: `  spent bench --embedded --duration 10s
  spent bench --addr http://127.0.0.1:7070 --concurrency 32 --batch 100 --repeat 0.1
  spent bench --embedded --duration 5s --json
  spent bench --soak --addr http://127.0.0.1:7070 --namespace soak --duration 3m --interval 10s`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			if err := checkBenchFlags(c.Flags(), &bc); err != nil {
				return err
			}
			if bc.soak {
				mix, err := checkSoakFlags(c.Flags(), &bc)
				if err != nil {
					return err
				}
				m.run = func(ctx context.Context) error { return m.soak(ctx, bc, mix) }
				return nil
			}
			for _, name := range []string{"interval", "mix"} {
				if c.Flags().Changed(name) {
					return usagef("--%s goes with --soak", name)
				}
			}
			m.run = func(ctx context.Context) error { return m.bench(ctx, bc) }
			return nil
		},
	}
	addBenchFlags(c.Flags(), &bc)
	return c
}

// addBenchFlags defines the bench command's flags, into bc.
func addBenchFlags(f *pflag.FlagSet, bc *benchConfig) {
	addClientFlags(f, &bc.client, "default", "`namespace` to claim in")
	f.BoolVar(&bc.embedded, "embedded", false, "run a ledger over a pebble store in this process instead of using a server")
	f.StringVar(&bc.data, "data", "", "with --embedded: data `directory` (default: a temporary one, removed afterwards)")
	f.IntVar(&bc.concurrency, "concurrency", 16, "concurrent workers, each with one request in flight")
	f.DurationVar(&bc.duration, "duration", 10*time.Second, "how long to generate load")
	f.IntVar(&bc.batch, "batch", 1, "claims per request (1: single claims)")
	f.IntVar(&bc.keys, "keys", 0, "key space size (0: every claim takes a fresh key)")
	f.Float64Var(&bc.repeat, "repeat", 0, "share of claims (0 to 1) that reuse a key claimed before")
	f.IntVar(&bc.resultSize, "result-size", 16, "size of each claim's result in `bytes`")
	f.Float64Var(&bc.rate, "rate", 0, "requests per second in all, sent on a fixed schedule (0: as fast as the workers go; default 2000 with --soak); latency then counts from each request's scheduled time")
	f.BoolVar(&bc.soak, "soak", false, "drive a server (--addr) with a mixed load for --duration (default 30m), printing a row of latency and server figures every --interval")
	f.DurationVar(&bc.interval, "interval", time.Minute, "with --soak: how often to print a row")
	f.StringVar(&bc.mix, "mix", defaultSoakMix, "with --soak: relative `weights` of the operations: claim (one-step, new key), repeat (one-step, earlier key), and two-step claims that complete, release or abandon")
}

// checkBenchFlags refuses flag values out of range and flags that do not go
// together; checkSoakFlags checks those of --soak.
func checkBenchFlags(f *pflag.FlagSet, bc *benchConfig) error {
	switch {
	case bc.concurrency < 1 || bc.concurrency > 10000:
		return usagef("--concurrency %d: want 1 to 10000", bc.concurrency)
	case bc.duration <= 0:
		return usagef("--duration %s: must be positive", bc.duration)
	case bc.batch < 1 || bc.batch > spent.MaxBatch:
		return usagef("--batch %d: want 1 to %d", bc.batch, spent.MaxBatch)
	case bc.keys < 0:
		return usagef("--keys %d: must not be negative", bc.keys)
	case bc.repeat < 0 || bc.repeat > 1:
		return usagef("--repeat %g: want a ratio from 0 to 1", bc.repeat)
	case bc.resultSize < 0 || bc.resultSize > spent.DefaultMaxResult:
		return usagef("--result-size %d: want 0 to %d", bc.resultSize, spent.DefaultMaxResult)
	case bc.rate < 0:
		return usagef("--rate %g: must not be negative", bc.rate)
	case bc.embedded && f.Changed("addr"):
		return usagef("--embedded and --addr: give one, not both")
	case !bc.embedded && f.Changed("data"):
		return usagef("--data goes with --embedded")
	}
	return nil
}

// benchReport is the outcome of a bench run; --json prints it as is.
type benchReport struct {
	Target          string           `json:"target"`
	Concurrency     int              `json:"concurrency"`
	Batch           int              `json:"batch"`
	Keys            int              `json:"keys"`
	Repeat          float64          `json:"repeat"`
	Rate            float64          `json:"rate,omitempty"`
	DurationSeconds float64          `json:"duration_seconds"`
	Claims          int64            `json:"claims"`
	Requests        int64            `json:"requests"`
	ClaimsPerSecond float64          `json:"claims_per_second"`
	Latency         benchLatency     `json:"latency_ms"`
	Outcomes        map[string]int64 `json:"outcomes"`
	Errors          int64            `json:"errors"`
	ErrorsByCode    map[string]int64 `json:"errors_by_code,omitempty"`
	// FirstError is the message of the first error seen, if any.
	FirstError string `json:"first_error,omitempty"`
}

// benchLatency holds request latencies in milliseconds.
type benchLatency struct {
	P50  float64 `json:"p50"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
}

// bench runs the load and prints the report.
func (m *Main) bench(ctx context.Context, bc benchConfig) error {
	svc, target, cleanup, err := m.benchService(ctx, bc)
	if err != nil {
		return err
	}
	defer cleanup()

	var prefix [6]byte
	if _, err := crand.Read(prefix[:]); err != nil {
		return err
	}
	run := &benchRun{
		cfg:    bc,
		svc:    svc,
		prefix: "bench-" + hex.EncodeToString(prefix[:]) + "-",
		result: make([]byte, bc.resultSize),
	}
	for i := range run.result {
		run.result[i] = 'a' + byte(i%26)
	}

	stopProgress := m.benchProgress(run)
	start := time.Now()
	run.start = start
	if bc.rate > 0 {
		run.interval = time.Duration(float64(time.Second) / bc.rate)
	}
	deadline := start.Add(bc.duration)
	workers := make([]*benchWorker, bc.concurrency)
	var wg sync.WaitGroup
	for i := range workers {
		w := &benchWorker{run: run, rnd: rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano()))), errs: map[string]int64{}}
		workers[i] = w
		wg.Go(func() { w.loop(ctx, deadline) })
	}
	wg.Wait()
	elapsed := time.Since(start)
	stopProgress()

	rep := run.report(workers, target, elapsed)
	if bc.client.json {
		b, err := json.Marshal(rep)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(m.Stdout, "%s\n", b); err != nil {
			return err
		}
	} else if err := rep.print(m.Stdout); err != nil {
		return err
	}
	return run.failed(rep)
}

// benchFailedError is the error of a run in which every request failed: no
// figure it printed measures the target. It wraps the last error, so that
// the exit status is that error's (13 for a server that cannot be reached).
type benchFailedError struct {
	errors int64
	target string
	last   error
}

func (e *benchFailedError) Error() string {
	return fmt.Sprintf("bench: every request failed (%d errors, none answered) against %s; the last: %s; check that the server is up and --addr, --token and --namespace are right",
		e.errors, e.target, errCause(e.last))
}

func (e *benchFailedError) Unwrap() error { return e.last }

// failed returns a *benchFailedError when the run made requests and not one
// was answered, nil otherwise.
func (run *benchRun) failed(rep *benchReport) error {
	if rep.Requests > 0 || rep.Errors == 0 {
		return nil
	}
	_, last := run.lastError()
	return &benchFailedError{errors: rep.Errors, target: rep.Target, last: last}
}

// errCause is what a progress line and the final error say of a failed
// request: its code and message, and the cause of a request that got no
// answer without the URL it was sent to.
func errCause(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		var se *spent.Error
		if errors.As(err, &se) {
			return se.Code + ": " + ue.Err.Error()
		}
		return ue.Err.Error()
	}
	var se *spent.Error
	if errors.As(err, &se) {
		if se.Err != nil {
			return se.Code + ": " + se.Message + ": " + se.Err.Error()
		}
		return se.Code + ": " + se.Message
	}
	return err.Error()
}

// benchService returns the service to load: the HTTP client, or a ledger over
// a pebble store in this process. cleanup closes and removes what it opened.
func (m *Main) benchService(ctx context.Context, bc benchConfig) (svc spent.Service, target string, cleanup func(), err error) {
	if !bc.embedded {
		return m.service(&bc.client), m.serverURL(&bc.client), func() {}, nil
	}
	dir := bc.data
	removeDir := false
	if dir == "" {
		if dir, err = os.MkdirTemp("", "spent-bench-"); err != nil {
			return nil, "", nil, err
		}
		removeDir = true
	}
	remove := func() {
		if removeDir {
			os.RemoveAll(dir)
		}
	}
	secret, _, err := openDataDir(dir, crand.Reader)
	if err != nil {
		remove()
		return nil, "", nil, err
	}
	opts := pebble.DefaultOptions()
	opts.Logger = slog.New(slog.NewTextHandler(m.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	store, err := pebble.Open(filepath.Join(dir, storeDir), opts)
	if err != nil {
		remove()
		return nil, "", nil, fmt.Errorf("opening store: %w", err)
	}
	lc := spent.DefaultConfig()
	lc.Secret = secret
	lc.Namespaces = map[string]spent.Policy{bc.client.namespace: spent.DefaultPolicy()}
	l, err := spent.NewLedger(ctx, store, lc)
	if err != nil {
		store.Close()
		remove()
		return nil, "", nil, err
	}
	return l, "embedded pebble in " + dir, func() {
		if err := store.Close(); err != nil {
			fmt.Fprintf(m.Stderr, "spent bench: closing store: %v\n", err)
		}
		remove()
	}, nil
}

// benchProgress prints claims/s so far to Stderr once a second until the
// returned function is called, and once requests have failed their number
// and the last one's cause. On a terminal the line is rewritten in place.
func (m *Main) benchProgress(run *benchRun) (stop func()) {
	eol := "\n"
	if f, ok := m.Stderr.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			eol = "\r"
		}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	start := time.Now()
	line := func(now time.Time) {
		el := now.Sub(start).Seconds()
		n := run.claims.Load()
		errs := ""
		if k, last := run.lastError(); k > 0 {
			errs = fmt.Sprintf("  %d errors, last: %s", k, errCause(last))
		}
		fmt.Fprintf(m.Stderr, "%6.1fs  %12d claims  %10.0f claims/s%s%s", el, n, float64(n)/el, errs, eol)
	}
	wg.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				// A last line with the final count, so that even a run
				// shorter than a second shows one.
				line(time.Now())
				if eol == "\r" {
					fmt.Fprint(m.Stderr, "\n")
				}
				return
			case now := <-t.C:
				line(now)
			}
		}
	})
	return sync.OnceFunc(func() {
		close(done)
		wg.Wait()
	})
}

// benchRun is the state the workers share.
type benchRun struct {
	cfg    benchConfig
	svc    spent.Service
	prefix string
	result []byte
	next   atomic.Uint64 // the next new key's number
	claims atomic.Int64  // claims answered, for the progress line
	// With --rate: request i is due at start + i*interval.
	start    time.Time
	interval time.Duration
	sent     atomic.Int64

	errMu   sync.Mutex
	errs    int64 // requests failed
	lastErr error // the last of them
}

// noteError counts a failed request for the progress line.
func (run *benchRun) noteError(err error) {
	run.errMu.Lock()
	run.errs++
	run.lastErr = err
	run.errMu.Unlock()
}

// lastError returns the number of failed requests and the last error.
func (run *benchRun) lastError() (int64, error) {
	run.errMu.Lock()
	defer run.errMu.Unlock()
	return run.errs, run.lastErr
}

// benchWorker sends requests one at a time and keeps its own counts.
type benchWorker struct {
	run      *benchRun
	rnd      *rand.Rand
	hist     histogram
	recent   recentKeys // keys this worker claimed, for --repeat
	claims   int64
	requests int64
	outcomes [len(outcomeKinds)]int64
	errs     map[string]int64
	firstErr string
}

// outcomeKinds lists the outcomes in the order the table prints them; it
// indexes the workers' counters.
var outcomeKinds = [5]spent.Outcome{spent.Fresh, spent.Replayed, spent.InProgress, spent.Refused, spent.Mismatch}

// maxRecent bounds each worker's memory of keys to repeat.
const maxRecent = 4096

// recentKeys remembers the last maxRecent keys a worker claimed.
type recentKeys struct {
	keys []string
	at   int // where the next key goes once keys is full
}

// add remembers k, forgetting the oldest key once full.
func (r *recentKeys) add(k string) {
	if len(r.keys) < maxRecent {
		r.keys = append(r.keys, k)
		return
	}
	r.keys[r.at] = k
	r.at = (r.at + 1) % maxRecent
}

// pick returns one of the keys remembered, or "" when there is none.
func (r *recentKeys) pick(rnd *rand.Rand) string {
	if len(r.keys) == 0 {
		return ""
	}
	return r.keys[rnd.IntN(len(r.keys))]
}

// key returns the next key to claim.
func (w *benchWorker) key() string {
	cfg := &w.run.cfg
	if cfg.repeat > 0 && len(w.recent.keys) > 0 && w.rnd.Float64() < cfg.repeat {
		return w.recent.pick(w.rnd)
	}
	n := w.run.next.Add(1) - 1
	if cfg.keys > 0 {
		n %= uint64(cfg.keys)
	}
	k := w.run.prefix + strconv.FormatUint(n, 10)
	if cfg.repeat > 0 {
		w.recent.add(k)
	}
	return k
}

// loop sends requests until the deadline or until ctx is cancelled. A
// request in flight at the deadline finishes and counts.
func (w *benchWorker) loop(ctx context.Context, deadline time.Time) {
	cfg := &w.run.cfg
	claims := make([]spent.Claim, cfg.batch)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		for i := range claims {
			claims[i] = spent.Claim{Namespace: cfg.client.namespace, Key: w.key(), Result: w.run.result}
		}
		var res []spent.Answer
		var err error
		start := time.Now()
		if w.run.interval > 0 {
			// Open loop: wait for this request's slot, and count latency
			// from it, so that a slow answer delays the measurement
			// rather than the schedule (no coordinated omission).
			due := w.run.start.Add(time.Duration(w.run.sent.Add(1)-1) * w.run.interval)
			if !due.Before(deadline) {
				return
			}
			if d := time.Until(due); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
					return
				}
			}
			start = due
		}
		rctx, cancel := context.WithTimeout(ctx, cfg.client.timeout)
		if cfg.batch == 1 {
			var r spent.Answer
			r, err = w.run.svc.Claim(rctx, claims[0])
			res = []spent.Answer{r}
		} else {
			res, err = w.run.svc.ClaimBatch(rctx, claims)
		}
		lat := time.Since(start)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return // interrupted: not the server's error
			}
			code := spent.ErrorCode(err)
			w.errs[code]++
			if w.firstErr == "" {
				w.firstErr = err.Error()
			}
			w.run.noteError(err)
			continue
		}
		w.requests++
		w.hist.record(uint64(lat))
		for _, r := range res {
			for i, o := range outcomeKinds {
				if r.Outcome == o {
					w.outcomes[i]++
				}
			}
		}
		w.claims += int64(len(res))
		w.run.claims.Add(int64(len(res)))
	}
}

// report merges the workers' counts.
func (run *benchRun) report(workers []*benchWorker, target string, elapsed time.Duration) *benchReport {
	cfg := &run.cfg
	rep := &benchReport{
		Target:          target,
		Concurrency:     cfg.concurrency,
		Batch:           cfg.batch,
		Keys:            cfg.keys,
		Repeat:          cfg.repeat,
		Rate:            cfg.rate,
		DurationSeconds: elapsed.Seconds(),
		Outcomes:        map[string]int64{},
		ErrorsByCode:    map[string]int64{},
	}
	var h histogram
	for _, o := range outcomeKinds {
		rep.Outcomes[string(o)] = 0
	}
	for _, w := range workers {
		h.merge(&w.hist)
		rep.Claims += w.claims
		rep.Requests += w.requests
		for i, o := range outcomeKinds {
			rep.Outcomes[string(o)] += w.outcomes[i]
		}
		for code, n := range w.errs {
			rep.ErrorsByCode[code] += n
			rep.Errors += n
		}
		if rep.FirstError == "" {
			rep.FirstError = w.firstErr
		}
	}
	if elapsed > 0 {
		rep.ClaimsPerSecond = float64(rep.Claims) / elapsed.Seconds()
	}
	ms := func(ns uint64) float64 { return float64(ns) / 1e6 }
	rep.Latency = benchLatency{
		P50:  ms(h.quantile(0.50)),
		P99:  ms(h.quantile(0.99)),
		P999: ms(h.quantile(0.999)),
		Max:  ms(h.max),
	}
	if len(rep.ErrorsByCode) == 0 {
		rep.ErrorsByCode = nil
	}
	return rep
}

// print writes the report as a table.
func (rep *benchReport) print(w io.Writer) error {
	var b strings.Builder
	row := func(name, value string) { fmt.Fprintf(&b, "  %-15s %14s\n", name, value) }
	fmt.Fprintf(&b, "spent bench: %s, concurrency %d, batch %d, keys %d, repeat %g, %.1fs\n",
		rep.Target, rep.Concurrency, rep.Batch, rep.Keys, rep.Repeat, rep.DurationSeconds)
	if rep.Rate > 0 {
		fmt.Fprintf(&b, "  open loop at %g requests/s; latency counts from each request's scheduled time\n", rep.Rate)
	}
	row("claims", strconv.FormatInt(rep.Claims, 10))
	row("requests", strconv.FormatInt(rep.Requests, 10))
	row("claims/s", strconv.FormatFloat(rep.ClaimsPerSecond, 'f', 0, 64))
	row("latency p50", fmt.Sprintf("%.3f ms", rep.Latency.P50))
	row("latency p99", fmt.Sprintf("%.3f ms", rep.Latency.P99))
	row("latency p99.9", fmt.Sprintf("%.3f ms", rep.Latency.P999))
	row("latency max", fmt.Sprintf("%.3f ms", rep.Latency.Max))
	for _, o := range outcomeKinds {
		row(string(o), strconv.FormatInt(rep.Outcomes[string(o)], 10))
	}
	row("errors", strconv.FormatInt(rep.Errors, 10))
	codes := make([]string, 0, len(rep.ErrorsByCode))
	for c := range rep.ErrorsByCode {
		codes = append(codes, c)
	}
	sort.Strings(codes)
	for _, c := range codes {
		row("  "+c, strconv.FormatInt(rep.ErrorsByCode[c], 10))
	}
	if rep.FirstError != "" {
		fmt.Fprintf(&b, "first error: %s\n", rep.FirstError)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
