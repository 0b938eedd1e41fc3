package main

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"

	"github.com/spentledger/spent"
)

// The soak's defaults where they differ from the plain bench's.
const (
	defaultSoakDuration = 30 * time.Minute
	defaultSoakRate     = 2000
	defaultSoakMix      = "claim=40,repeat=25,complete=20,release=10,abandon=5"
)

// soakOp is one kind of operation the soak issues.
type soakOp int

// The operations of the soak, in the order --mix and the reports name them.
const (
	// soakClaim is a one-step claim of a new key.
	soakClaim soakOp = iota
	// soakRepeat is a one-step claim of a key this worker claimed before:
	// replayed while its record lives, fresh once it expired or was
	// released, in progress while an abandoned claim's lease runs.
	soakRepeat
	// soakComplete is a two-step claim of a new key, then its completion.
	soakComplete
	// soakRelease is a two-step claim of a new key, then its release.
	soakRelease
	// soakAbandon is a two-step claim of a new key left pending: its lease
	// runs out and its record expires with the namespace's retention.
	soakAbandon
	numSoakOps
)

var soakOpNames = [numSoakOps]string{"claim", "repeat", "complete", "release", "abandon"}

// The requests the soak sends, counted apart: a two-step operation sends a
// pending claim, then (unless abandoned) a completion or a release.
const (
	soakReqClaim    = "claim"    // one-step claims of new keys
	soakReqRepeat   = "repeat"   // one-step claims of earlier keys
	soakReqTwoStep  = "two_step" // pending claims of new keys
	soakReqComplete = "complete" // completions
	soakReqRelease  = "release"  // releases
	soakReqAbandon  = "abandon"  // pending claims left to their lease
)

var soakRequestKinds = []string{soakReqClaim, soakReqRepeat, soakReqTwoStep, soakReqComplete, soakReqRelease, soakReqAbandon}

// errUnexpected marks an answer the soak knows to be wrong: a new key not
// answered fresh, or a replay of other bytes than those stored. It counts as
// a failed request, under the code unexpectedCode.
var errUnexpected = errors.New("unexpected answer")

// unexpectedCode is the error code the report gives errUnexpected.
const unexpectedCode = "unexpected_answer"

// checkSoakFlags applies the soak's defaults to bc and returns the weights of
// --mix, or a usage error.
func checkSoakFlags(f *pflag.FlagSet, bc *benchConfig) ([numSoakOps]int, error) {
	var w [numSoakOps]int
	if bc.embedded {
		return w, usagef("--soak drives a server: give --addr (or SPENT_ADDR), not --embedded; its figures come from the server's /metrics")
	}
	for _, name := range []string{"batch", "keys", "repeat"} {
		if f.Changed(name) {
			return w, usagef("--%s does not go with --soak: --mix shapes the soak's load", name)
		}
	}
	if !f.Changed("duration") {
		bc.duration = defaultSoakDuration
	}
	if !f.Changed("rate") {
		bc.rate = defaultSoakRate
	}
	if bc.interval <= 0 || bc.interval > bc.duration {
		return w, usagef("--interval %s: want a positive duration no longer than --duration %s", bc.interval, bc.duration)
	}
	return parseSoakMix(bc.mix)
}

// parseSoakMix reads "claim=40,repeat=25,…": a non-negative weight per
// operation named, zero for those not named.
func parseSoakMix(s string) ([numSoakOps]int, error) {
	var w [numSoakOps]int
	var seen [numSoakOps]bool
	sum := 0
	for part := range strings.SplitSeq(s, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return w, usagef("--mix %q: want name=weight pairs separated by commas, such as %q", s, defaultSoakMix)
		}
		i := -1
		for j, n := range soakOpNames {
			if n == name {
				i = j
			}
		}
		if i < 0 {
			return w, usagef("--mix %q: unknown operation %q; want %s", s, name, strings.Join(soakOpNames[:], ", "))
		}
		if seen[i] {
			return w, usagef("--mix %q: %s given twice", s, name)
		}
		n, err := strconv.Atoi(val)
		if err != nil || n < 0 || n > 1000000 {
			return w, usagef("--mix %q: weight of %s %q: want a whole number from 0 to 1000000", s, name, val)
		}
		seen[i] = true
		w[i] = n
		sum += n
	}
	if sum == 0 {
		return w, usagef("--mix %q: every weight is 0", s)
	}
	return w, nil
}

// soakRow is one interval of the soak. Server figures that could not be read
// are -1.
type soakRow struct {
	// ElapsedSeconds is the time since the load started.
	ElapsedSeconds float64 `json:"elapsed_seconds"`
	// Requests and Errors count the requests answered in the interval.
	Requests int64 `json:"requests"`
	Errors   int64 `json:"errors"`
	// P50 and P99 are the latencies of the interval's answered requests, in
	// milliseconds, counted from each request's scheduled time.
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
	// ServerP99 is the server's own time for the interval's 99th percentile
	// one-step and two-step claim (decode, HMAC, durable write, encode; not
	// completions or releases), from spent_claim_duration_seconds: the upper
	// bound of its bucket, in milliseconds; 0 without claims, -1 when not
	// read. ServerP99Over says it lies above the largest bucket.
	ServerP99     float64 `json:"server_p99_ms"`
	ServerP99Over bool    `json:"server_p99_over,omitempty"`
	// RSSBytes is the server's resident memory (process_resident_memory_bytes).
	RSSBytes int64 `json:"rss_bytes"`
	// HeapBytes is the server's Go heap in use (go_memstats_heap_inuse_bytes).
	HeapBytes int64 `json:"heap_bytes"`
	// Goroutines is the server's go_goroutines.
	Goroutines int64 `json:"goroutines"`
	// Records is spent_store_records: records the embedded store holds,
	// expired but unswept ones included.
	Records int64 `json:"records"`
	// Expired is how many expired records the sweeper removed in the
	// interval (spent_sweep_removed_records_total).
	Expired int64 `json:"expired"`
}

// soakReport is the outcome of a soak; --json prints it as is.
type soakReport struct {
	Target          string         `json:"target"`
	Namespace       string         `json:"namespace"`
	Rate            float64        `json:"rate"`
	Concurrency     int            `json:"concurrency"`
	Mix             map[string]int `json:"mix"`
	IntervalSeconds float64        `json:"interval_seconds"`
	DurationSeconds float64        `json:"duration_seconds"`
	Rows            []soakRow      `json:"rows"`
	// Operations counts the requests sent, by kind (soakRequestKinds).
	Operations   map[string]int64 `json:"operations"`
	Requests     int64            `json:"requests"`
	Outcomes     map[string]int64 `json:"outcomes"`
	Errors       int64            `json:"errors"`
	ErrorsByCode map[string]int64 `json:"errors_by_code,omitempty"`
	FirstError   string           `json:"first_error,omitempty"`
	// SampleErrors counts the reads of /metrics that failed.
	SampleErrors     int64  `json:"sample_errors"`
	FirstSampleError string `json:"first_sample_error,omitempty"`
}

// soakWindow gathers the requests of the current interval.
type soakWindow struct {
	mu       sync.Mutex
	hist     histogram
	requests int64
	errors   int64
}

func (w *soakWindow) answered(lat time.Duration) {
	w.mu.Lock()
	w.hist.record(uint64(lat))
	w.requests++
	w.mu.Unlock()
}

func (w *soakWindow) failed() {
	w.mu.Lock()
	w.errors++
	w.mu.Unlock()
}

// take returns the interval's figures into row and starts the next interval.
func (w *soakWindow) take(row *soakRow) {
	w.mu.Lock()
	defer w.mu.Unlock()
	row.Requests, row.Errors = w.requests, w.errors
	row.P50 = float64(w.hist.quantile(0.50)) / 1e6
	row.P99 = float64(w.hist.quantile(0.99)) / 1e6
	w.hist = histogram{}
	w.requests, w.errors = 0, 0
}

// soakRun is the state the soak's workers share.
type soakRun struct {
	cfg     benchConfig
	svc     spent.Service
	prefix  string
	result  []byte
	weights [numSoakOps]int
	total   int // sum of weights

	// Request i is due at start + i*every (every is 0 without a rate).
	start time.Time
	every time.Duration
	sent  atomic.Int64

	next   atomic.Uint64 // the next new key's number
	window soakWindow

	mu         sync.Mutex
	ops        map[string]int64
	outcomes   map[string]int64
	errs       map[string]int64
	firstError string
}

// soakWorker sends one request at a time.
type soakWorker struct {
	run    *soakRun
	rnd    *rand.Rand
	recent recentKeys // new keys this worker claimed, for repeats
}

// soak runs the soak against the server bc names and prints its rows and
// report. It fails if any request failed or was answered wrongly, or if
// /metrics could not be read.
func (m *Main) soak(ctx context.Context, bc benchConfig, weights [numSoakOps]int) error {
	target := m.serverURL(&bc.client)
	sampler := &soakSampler{url: strings.TrimSuffix(target, "/") + "/metrics", client: &http.Client{Timeout: 10 * time.Second}}
	before, err := sampler.sample(ctx)
	if err != nil {
		return fmt.Errorf("soak: %w: is a spent server running at %s?", err, target)
	}
	if before.rss <= 0 || before.goroutines <= 0 {
		return fmt.Errorf("soak: %s has no process_resident_memory_bytes or go_goroutines: the soak reads them from a spent server on Linux", sampler.url)
	}
	run, err := newSoakRun(bc, m.service(&bc.client), weights)
	if err != nil {
		return err
	}

	rows := m.Stdout
	if bc.client.json {
		rows = m.Stderr // stdout carries the one JSON object
	}
	rep := &soakReport{
		Target: target, Namespace: bc.client.namespace, Rate: bc.rate, Concurrency: bc.concurrency,
		Mix: map[string]int{}, IntervalSeconds: bc.interval.Seconds(), DurationSeconds: bc.duration.Seconds(),
	}
	for i, n := range soakOpNames {
		rep.Mix[n] = weights[i]
	}
	fmt.Fprintf(rows, "spent bench --soak: %s, namespace %s, %s requests/s, concurrency %d, mix %s, a row every %s for %s\n",
		target, bc.client.namespace, rateText(bc.rate), bc.concurrency, bc.mix, bc.interval, bc.duration)
	fmt.Fprintln(rows, soakHeader)
	first := soakRow{RSSBytes: before.rss, HeapBytes: before.heap, Goroutines: before.goroutines, Records: before.records}
	rep.Rows = append(rep.Rows, first)
	fmt.Fprintln(rows, first.text())

	run.start = time.Now()
	deadline := run.start.Add(bc.duration)
	var wg sync.WaitGroup
	for i := range bc.concurrency {
		w := &soakWorker{run: run, rnd: rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))}
		wg.Go(func() { w.loop(ctx, deadline) })
	}
	rep.record(ctx, run, sampler, before, deadline, &wg, rows)
	rep.tally(run)
	return m.soakEnd(rep, bc.client.json)
}

// newSoakRun returns the state the workers of a soak share: a random key
// prefix of its own, the result bytes, and the pace of --rate.
func newSoakRun(bc benchConfig, svc spent.Service, weights [numSoakOps]int) (*soakRun, error) {
	var prefix [6]byte
	if _, err := crand.Read(prefix[:]); err != nil {
		return nil, err
	}
	run := &soakRun{
		cfg:      bc,
		svc:      svc,
		prefix:   "soak-" + hex.EncodeToString(prefix[:]) + "-",
		result:   make([]byte, bc.resultSize),
		weights:  weights,
		ops:      map[string]int64{},
		outcomes: map[string]int64{},
		errs:     map[string]int64{},
	}
	for _, w := range weights {
		run.total += w
	}
	for i := range run.result {
		run.result[i] = 'a' + byte(i%26)
	}
	if bc.rate > 0 {
		run.every = time.Duration(float64(time.Second) / bc.rate)
	}
	return run, nil
}

// record adds a row to rep, and prints it to out, at the end of every
// interval from run.start until the deadline or until ctx is cancelled. The
// last row waits for the workers (wg), so that it counts the requests still
// in flight at the deadline.
func (rep *soakReport) record(ctx context.Context, run *soakRun, sampler *soakSampler, before soakSample, deadline time.Time, wg *sync.WaitGroup, out io.Writer) {
	interval := run.cfg.interval
	last := before
	for k := 1; ; k++ {
		at := run.start.Add(time.Duration(k) * interval)
		end := !at.Before(deadline)
		if end {
			at = deadline
		}
		select {
		case <-time.After(time.Until(at)):
		case <-ctx.Done():
			end = true
		}
		if end {
			wg.Wait()
		}
		row := soakRow{ElapsedSeconds: time.Since(run.start).Seconds()}
		run.window.take(&row)
		s, err := sampler.sample(context.WithoutCancel(ctx))
		if err != nil {
			rep.SampleErrors++
			if rep.FirstSampleError == "" {
				rep.FirstSampleError = err.Error()
			}
			s = soakSample{rss: -1, heap: -1, goroutines: -1, records: -1, removed: -1}
		}
		row.setServer(last, s)
		if err == nil {
			last = s
		}
		rep.Rows = append(rep.Rows, row)
		fmt.Fprintln(out, row.text())
		if end {
			return
		}
	}
}

// setServer sets the row's figures read from the server: those of cur, and
// the claim latency and expired records since last. A figure not read is -1.
func (r *soakRow) setServer(last, cur soakSample) {
	r.ServerP99, r.ServerP99Over = serverP99(last.claimBuckets, cur.claimBuckets)
	r.RSSBytes, r.HeapBytes, r.Goroutines, r.Records = cur.rss, cur.heap, cur.goroutines, cur.records
	r.Expired = -1
	if cur.removed >= 0 && last.removed >= 0 {
		r.Expired = cur.removed - last.removed
	}
}

// tally sets the report's counts from the run's: requests by kind, outcomes
// (every kind present, zero or not) and errors by code.
func (rep *soakReport) tally(run *soakRun) {
	rep.Operations, rep.Outcomes = run.ops, run.outcomes
	for _, k := range soakRequestKinds {
		rep.Operations[k] += 0 // present, zero or not
	}
	for _, o := range outcomeKinds {
		rep.Outcomes[string(o)] += 0
	}
	for _, n := range rep.Operations {
		rep.Requests += n
	}
	for code, n := range run.errs {
		rep.Errors += n
		if rep.ErrorsByCode == nil {
			rep.ErrorsByCode = map[string]int64{}
		}
		rep.ErrorsByCode[code] = n
	}
	rep.FirstError = run.firstError
}

// soakEnd prints the report on stdout, as text or one JSON object, and
// returns the soak's failure: failed or wrong answers, failed reads of
// /metrics.
func (m *Main) soakEnd(rep *soakReport, asJSON bool) error {
	if asJSON {
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
	var errs []error
	if rep.Errors > 0 {
		errs = append(errs, fmt.Errorf("soak: %d of %d requests failed; the first: %s", rep.Errors, rep.Requests, rep.FirstError))
	}
	if rep.SampleErrors > 0 {
		errs = append(errs, fmt.Errorf("soak: %d of %d reads of the server's /metrics failed; the first: %s", rep.SampleErrors, len(rep.Rows), rep.FirstSampleError))
	}
	return errors.Join(errs...)
}

// rateText writes a --rate for the header.
func rateText(rate float64) string {
	if rate <= 0 {
		return "unlimited"
	}
	return strconv.FormatFloat(rate, 'f', -1, 64)
}

// loop runs operations until the deadline or until ctx is cancelled.
func (w *soakWorker) loop(ctx context.Context, deadline time.Time) {
	run := w.run
	ns := run.cfg.client.namespace
	for {
		op := w.pick()
		if op == soakRepeat && len(w.recent.keys) == 0 {
			op = soakClaim
		}
		switch op {
		case soakClaim, soakRepeat:
			var key, kind string
			if op == soakClaim {
				key, kind = w.newKey(), soakReqClaim
			} else {
				key, kind = w.recent.pick(w.rnd), soakReqRepeat
			}
			if !w.send(ctx, deadline, kind, func(ctx context.Context) error {
				res, err := run.svc.Claim(ctx, spent.Claim{Namespace: ns, Key: key, Place: "soak", Result: run.result})
				if err != nil {
					return err
				}
				run.outcome(res.Outcome)
				return run.check(key, op == soakClaim, res)
			}) {
				return
			}
		default:
			key := w.newKey()
			kind := soakReqTwoStep
			if op == soakAbandon {
				kind = soakReqAbandon
			}
			var res spent.Answer
			var claimed bool
			if !w.send(ctx, deadline, kind, func(ctx context.Context) error {
				var err error
				res, err = run.svc.Claim(ctx, spent.Claim{Namespace: ns, Key: key, Place: "soak"})
				if err != nil {
					return err
				}
				run.outcome(res.Outcome)
				claimed = res.Outcome == spent.Fresh
				return run.check(key, true, res)
			}) {
				return
			}
			if op == soakAbandon || !claimed {
				continue
			}
			seq := res.Record.Seq
			var ok bool
			switch op {
			case soakComplete:
				ok = w.send(ctx, deadline, soakReqComplete, func(ctx context.Context) error {
					_, err := run.svc.Complete(ctx, spent.Completion{Namespace: ns, Key: key, Seq: seq, Result: run.result})
					return err
				})
			case soakRelease:
				ok = w.send(ctx, deadline, soakReqRelease, func(ctx context.Context) error {
					return run.svc.Release(ctx, spent.Release{Namespace: ns, Key: key, Seq: seq})
				})
			}
			if !ok {
				return
			}
		}
	}
}

// pick draws the next operation by the --mix weights.
func (w *soakWorker) pick() soakOp {
	n := w.rnd.IntN(w.run.total)
	for i, wt := range w.run.weights {
		if n < wt {
			return soakOp(i)
		}
		n -= wt
	}
	return soakClaim
}

// newKey returns a key never claimed before and remembers it for repeats.
func (w *soakWorker) newKey() string {
	k := w.run.prefix + strconv.FormatUint(w.run.next.Add(1)-1, 10)
	w.recent.add(k)
	return k
}

// send waits for the next request's scheduled time, then runs do with the
// request timeout and counts the answer as a request of kind. It reports
// false, sending nothing, once the deadline has passed or ctx is cancelled.
func (w *soakWorker) send(ctx context.Context, deadline time.Time, kind string, do func(context.Context) error) bool {
	run := w.run
	start := time.Now()
	if run.every > 0 {
		// Open loop: latency counts from the scheduled time, so that a
		// slow answer delays the measurement rather than the schedule.
		due := run.start.Add(time.Duration(run.sent.Add(1)-1) * run.every)
		if !due.Before(deadline) {
			return false
		}
		if d := time.Until(due); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return false
			}
		}
		start = due
	} else if !start.Before(deadline) {
		return false
	}
	if ctx.Err() != nil {
		return false
	}
	rctx, cancel := context.WithTimeout(ctx, run.cfg.client.timeout)
	err := do(rctx)
	lat := time.Since(start)
	cancel()
	if err != nil && ctx.Err() != nil {
		return false // interrupted: not the server's error
	}
	run.mu.Lock()
	run.ops[kind]++
	if err != nil {
		code := spent.ErrorCode(err)
		if errors.Is(err, errUnexpected) {
			code = unexpectedCode
		}
		run.errs[code]++
		if run.firstError == "" {
			run.firstError = kind + ": " + err.Error()
		}
	}
	run.mu.Unlock()
	if err != nil {
		run.window.failed()
	} else {
		run.window.answered(lat)
	}
	return true
}

// check returns an errUnexpected error when the answer to a claim of key is
// known to be wrong: a key never claimed before (isNew) must be fresh, and a
// replay must return the bytes every claim and completion of the soak stores.
func (run *soakRun) check(key string, isNew bool, res spent.Answer) error {
	switch {
	case isNew && res.Outcome != spent.Fresh:
		return fmt.Errorf("%w: key %s, never claimed before, answered %s", errUnexpected, key, res.Outcome)
	case res.Outcome == spent.Replayed && string(res.Record.Result) != string(run.result):
		return fmt.Errorf("%w: key %s replayed %d bytes %q, want the %d stored", errUnexpected, key, len(res.Record.Result), res.Record.Result, len(run.result))
	}
	return nil
}

// outcome counts a claim's outcome.
func (run *soakRun) outcome(o spent.Outcome) {
	run.mu.Lock()
	run.outcomes[string(o)]++
	run.mu.Unlock()
}

// soakHeader names the columns of soakRow.text.
const soakHeader = " elapsed  requests  errors   p50 ms   p99 ms  server p99 ms  RSS MiB  heap MiB  goroutines   records   expired"

// text is the row under soakHeader.
func (r soakRow) text() string {
	return fmt.Sprintf("%8s  %8d  %6d  %7.3f  %7.3f  %13s  %7s  %8s  %10s  %8s  %8s",
		elapsedText(r.ElapsedSeconds), r.Requests, r.Errors, r.P50, r.P99, r.serverP99Text(),
		mib(r.RSSBytes), mib(r.HeapBytes), count(r.Goroutines), count(r.Records), count(r.Expired))
}

// serverP99Text writes ServerP99: "≤ 3.2", "> 1638.4", "-" when not read.
func (r soakRow) serverP99Text() string {
	switch {
	case r.ServerP99 < 0:
		return "-"
	case r.ServerP99 == 0:
		return "0"
	case r.ServerP99Over:
		return "> " + strconv.FormatFloat(r.ServerP99, 'f', -1, 64)
	}
	return "≤ " + strconv.FormatFloat(r.ServerP99, 'f', -1, 64)
}

// elapsedText writes seconds as a duration to the second ("1m0s").
func elapsedText(s float64) string {
	return (time.Duration(s * float64(time.Second))).Round(time.Second).String()
}

// mib writes bytes in MiB, "-" when not read.
func mib(b int64) string {
	if b < 0 {
		return "-"
	}
	return strconv.FormatFloat(float64(b)/(1<<20), 'f', 1, 64)
}

// count writes n, "-" when not read.
func count(n int64) string {
	if n < 0 {
		return "-"
	}
	return strconv.FormatInt(n, 10)
}

// print writes the totals and the rows as a markdown table.
func (rep *soakReport) print(w io.Writer) error {
	var b strings.Builder
	b.WriteString("\noperations:")
	for _, k := range soakRequestKinds {
		fmt.Fprintf(&b, " %s %d", k, rep.Operations[k])
	}
	fmt.Fprintf(&b, " (%d requests)\noutcomes:", rep.Requests)
	for _, o := range outcomeKinds {
		fmt.Fprintf(&b, " %s %d", o, rep.Outcomes[string(o)])
	}
	fmt.Fprintf(&b, "\nerrors: %d", rep.Errors)
	codes := make([]string, 0, len(rep.ErrorsByCode))
	for c := range rep.ErrorsByCode {
		codes = append(codes, c)
	}
	sort.Strings(codes)
	for _, c := range codes {
		fmt.Fprintf(&b, " %s %d", c, rep.ErrorsByCode[c])
	}
	if rep.FirstError != "" {
		fmt.Fprintf(&b, " (first: %s)", rep.FirstError)
	}
	fmt.Fprintf(&b, "; failed reads of /metrics: %d", rep.SampleErrors)
	if rep.FirstSampleError != "" {
		fmt.Fprintf(&b, " (first: %s)", rep.FirstSampleError)
	}
	b.WriteString("\n\n| elapsed | requests | errors | p50 ms | p99 ms | server p99 ms | RSS MiB | heap MiB | goroutines | records | expired |\n")
	b.WriteString("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range rep.Rows {
		fmt.Fprintf(&b, "| %s | %d | %d | %.3f | %.3f | %s | %s | %s | %s | %s | %s |\n",
			elapsedText(r.ElapsedSeconds), r.Requests, r.Errors, r.P50, r.P99, r.serverP99Text(),
			mib(r.RSSBytes), mib(r.HeapBytes), count(r.Goroutines), count(r.Records), count(r.Expired))
	}
	_, err := io.WriteString(w, b.String())
	return err
}
