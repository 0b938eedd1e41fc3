package ecash

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names, exported so that dashboards and tests name them once. The
// issuer's books read from them: issued = charged + outstanding, each a
// total since the issuer started.
const (
	// MetricValueIssued counts the value issued against solved challenges
	// (IssueValue per fresh issuance): Stats.Issued.
	MetricValueIssued = "spent_ecash_value_issued_total"
	// MetricValueCharged counts the value the issuer kept: the charge of
	// each fresh spend (the input's value less the change) and the value
	// of each fresh issuance that its outputs did not ask for:
	// Stats.Charged.
	MetricValueCharged = "spent_ecash_value_charged_total"
	// MetricValueOutstanding is issued less charged: the value of the
	// tokens signed that have not come back in a spend, as far as this
	// issuer has seen. A spend of a token signed before a restart, or by
	// another server sharing the ledger, takes it down without having
	// added to it, so one process's gauge can go below zero; across
	// servers, sum it.
	MetricValueOutstanding = "spent_ecash_value_outstanding"
	// MetricSpends counts spend requests answered, by outcome: "fresh" (a
	// new spend recorded), "replayed" (the same request again, answered
	// with the stored response), or the error code of a refusal
	// (double_spend, proof_invalid, bad_request, unavailable, internal).
	MetricSpends = "spent_ecash_spends_total"
	// MetricIssuances counts issuance requests answered, by outcome:
	// "fresh", "replayed", or the error code of a refusal
	// (challenge_mismatch, challenge_gone, proof_invalid, bad_request,
	// unavailable, internal).
	MetricIssuances = "spent_ecash_issuances_total"
	// MetricSignatures counts the blind signatures computed (a replay
	// computes none): Stats.Signatures.
	MetricSignatures = "spent_ecash_signatures_total"
)

// Outcomes of MetricSpends and MetricIssuances besides the error codes.
const (
	outcomeFresh    = "fresh"
	outcomeReplayed = "replayed"
)

// books are the issuer's running totals, read together so that a scrape
// always sees issued = charged + outstanding.
type books struct {
	mu                      sync.Mutex
	issued, charged, spends uint64
}

// fresh enters a fresh record of kind "issue" or "spend" with resp.
func (b *books) fresh(kind string, resp *Response) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if kind == "issue" {
		b.issued += resp.Value
	} else {
		b.spends++
	}
	b.charged += resp.Charge
}

// issuerMetrics is the Collector of an issuer's metrics.
type issuerMetrics struct {
	is                                  *Issuer
	issued, charged, outstanding, signs *prometheus.Desc
	spends, issuances                   *prometheus.CounterVec
}

func newIssuerMetrics(is *Issuer) *issuerMetrics {
	m := &issuerMetrics{
		is:          is,
		issued:      prometheus.NewDesc(MetricValueIssued, "Value issued against solved challenges.", nil, nil),
		charged:     prometheus.NewDesc(MetricValueCharged, "Value the issuer kept: spend charges and issuance value not asked for.", nil, nil),
		outstanding: prometheus.NewDesc(MetricValueOutstanding, "Value issued less value charged: tokens signed and not spent back, as this issuer has seen them.", nil, nil),
		signs:       prometheus.NewDesc(MetricSignatures, "Blind signatures computed.", nil, nil),
		spends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricSpends, Help: "Spend requests answered, by outcome (fresh, replayed, or the error code).",
		}, []string{"outcome"}),
		issuances: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricIssuances, Help: "Issuance requests answered, by outcome (fresh, replayed, or the error code).",
		}, []string{"outcome"}),
	}
	for _, o := range []string{outcomeFresh, outcomeReplayed} {
		m.spends.WithLabelValues(o)
		m.issuances.WithLabelValues(o)
	}
	return m
}

// Describe sends the descriptions of the issuer's metrics.
func (m *issuerMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.issued
	ch <- m.charged
	ch <- m.outstanding
	ch <- m.signs
	m.spends.Describe(ch)
	m.issuances.Describe(ch)
}

// Collect sends the issuer's metrics, the books from one snapshot.
func (m *issuerMetrics) Collect(ch chan<- prometheus.Metric) {
	s := m.is.Stats()
	ch <- prometheus.MustNewConstMetric(m.issued, prometheus.CounterValue, float64(s.Issued))
	ch <- prometheus.MustNewConstMetric(m.charged, prometheus.CounterValue, float64(s.Charged))
	ch <- prometheus.MustNewConstMetric(m.outstanding, prometheus.GaugeValue, float64(s.Issued)-float64(s.Charged))
	ch <- prometheus.MustNewConstMetric(m.signs, prometheus.CounterValue, float64(s.Signatures))
	m.spends.Collect(ch)
	m.issuances.Collect(ch)
}

// count counts an answer of vec's kind.
func count(vec *prometheus.CounterVec, a Answer, err error) {
	outcome := outcomeFresh
	var e *Error
	switch {
	case errors.As(err, &e):
		outcome = e.Code
	case err != nil:
		outcome = CodeInternal
	case a.Replayed:
		outcome = outcomeReplayed
	}
	vec.WithLabelValues(outcome).Inc()
}

// Metrics returns the issuer's metrics (the Metric* names), to register
// with a prometheus.Registerer.
func (is *Issuer) Metrics() prometheus.Collector { return is.metrics }
