package node

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spentledger/spent"
)

// Metric names of the ledger's work, which the node counts whichever front
// end (the HTTP API, Privacy Pass, e-cash, the idempotency middleware)
// called the ledger.
const (
	// MetricLedgerClaims counts answered claims by namespace and outcome,
	// each claim of a batch included. Only configured namespaces are
	// labels: a claim in another is refused (unknown_namespace) before it
	// is answered, and counted in MetricLedgerErrors.
	MetricLedgerClaims = "spent_ledger_claims_total"
	// MetricLedgerErrors counts ledger operations that ended in an error,
	// by operation and error code (a spent.E* code; "other" for a code the
	// node does not know).
	MetricLedgerErrors = "spent_ledger_errors_total"
	// MetricLedgerOperation is a histogram of the time ledger operations
	// took, failed ones included, by operation: "claim", "claim_batch",
	// "complete", "release", "get", "count".
	MetricLedgerOperation = "spent_ledger_operation_seconds"
)

// ledgerOps are the operations the ledger tells an observer of, in the
// order of their series.
var ledgerOps = [...]string{"claim", "claim_batch", "complete", "release", "get", "count"}

// ledgerOutcomes are the claim outcomes, in the order of their series.
var ledgerOutcomes = [...]spent.Outcome{spent.Fresh, spent.Replayed, spent.InProgress, spent.Refused, spent.Mismatch}

// errorCodes are the error codes counted under their own label; any other
// is counted as "other", so that the label's values stay bounded.
var errorCodes = map[string]bool{
	spent.EInvalid: true, spent.EUnknownNamespace: true, spent.EKeyTooLong: true, spent.ETooLarge: true,
	spent.ENotFound: true, spent.ENotPending: true, spent.ESeqMismatch: true, spent.ELeaseExpired: true,
	spent.EUnauthorized: true, spent.EForbidden: true, spent.EUnavailable: true, spent.EInternal: true,
}

// ledgerMetrics is the spent.Observer that counts the ledger's work in
// Prometheus collectors, with the series of the hot path resolved up front.
type ledgerMetrics struct {
	claims  map[string]*[len(ledgerOutcomes)]prometheus.Counter
	errors  *prometheus.CounterVec
	seconds [len(ledgerOps)]prometheus.Observer

	claimsVec  *prometheus.CounterVec
	secondsVec *prometheus.HistogramVec
}

var _ spent.Observer = (*ledgerMetrics)(nil)

// newLedgerMetrics returns the collectors of a ledger over namespaces, every
// namespace and outcome at 0.
func newLedgerMetrics(namespaces map[string]spent.Policy) *ledgerMetrics {
	m := &ledgerMetrics{
		claims: make(map[string]*[len(ledgerOutcomes)]prometheus.Counter, len(namespaces)),
		claimsVec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricLedgerClaims,
			Help: "Claims the ledger answered, whichever front end made them, by namespace and outcome.",
		}, []string{"namespace", "outcome"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricLedgerErrors,
			Help: "Ledger operations that ended in an error, by operation and error code.",
		}, []string{"op", "code"}),
		secondsVec: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    MetricLedgerOperation,
			Help:    "Time ledger operations took, durable write included, failed ones too, by operation.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 16), // 50 µs to 1.6 s
		}, []string{"op"}),
	}
	for ns := range namespaces {
		var cs [len(ledgerOutcomes)]prometheus.Counter
		for i, o := range ledgerOutcomes {
			cs[i] = m.claimsVec.WithLabelValues(ns, string(o))
		}
		m.claims[ns] = &cs
	}
	for i, op := range ledgerOps {
		m.seconds[i] = m.secondsVec.WithLabelValues(op)
	}
	return m
}

// LedgerMetrics returns the spent.Observer that counts a ledger's work
// (MetricLedgerClaims, MetricLedgerErrors, MetricLedgerOperation) over
// namespaces, its collectors registered with reg: give it to the ledger as
// its Config.Observer (spent.Observers joins it to another). A Node does
// this itself when its Config has a Registerer; LedgerMetrics is for a
// ledger made without a Node, such as a test's.
func LedgerMetrics(namespaces map[string]spent.Policy, reg prometheus.Registerer) (spent.Observer, error) {
	m := newLedgerMetrics(namespaces)
	for _, c := range m.collectors() {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("node: registering the ledger's metrics: %w", err)
		}
	}
	return m, nil
}

// collectors returns the collectors to register.
func (m *ledgerMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.claimsVec, m.errors, m.secondsVec}
}

func noEnd(error) {}

// Start times the operation and counts its error, if any, at its end.
func (m *ledgerMetrics) Start(ctx context.Context, op, _ string) (context.Context, func(error)) {
	i := opIndex(op)
	if i < 0 {
		return ctx, noEnd
	}
	start := time.Now()
	return ctx, func(err error) {
		m.seconds[i].Observe(time.Since(start).Seconds())
		if err != nil {
			code := spent.ErrorCode(err)
			if !errorCodes[code] {
				code = "other"
			}
			m.errors.WithLabelValues(ledgerOps[i], code).Inc()
		}
	}
}

// Answered counts a claim's outcome in its namespace; an unconfigured
// namespace or an unknown outcome is not counted.
func (m *ledgerMetrics) Answered(_ context.Context, namespace string, outcome spent.Outcome) {
	cs := m.claims[namespace]
	if cs == nil {
		return
	}
	for i, o := range ledgerOutcomes {
		if o == outcome {
			cs[i].Inc()
			return
		}
	}
}

func opIndex(op string) int {
	for i, o := range ledgerOps {
		if o == op {
			return i
		}
	}
	return -1
}
