package privacypass

import (
	"encoding/binary"
	"errors"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names, exported so that dashboards and tests name them once.
const (
	// MetricTokenRequests counts the issuer's answers to token requests,
	// by token_type ("1", "2", or "unknown" before the request names a
	// supported type) and outcome: "issued", or the problem code of the
	// refusal (quota_exceeded, unknown_key, unauthorized, ...).
	MetricTokenRequests = "spent_privacypass_token_requests_total"
	// MetricRedemptions counts redemptions, by token_type (as above) and
	// outcome: "redeemed", or the problem code of the refusal
	// (double_spend, proof_invalid, token_required, unavailable, ...).
	MetricRedemptions = "spent_privacypass_redemptions_total"
)

// Outcomes of the metrics besides the problem codes.
const (
	outcomeIssued   = "issued"
	outcomeRedeemed = "redeemed"
)

// typeLabel is the token_type label of t: its number for a supported type,
// "unknown" for any other, so that the label's values stay bounded.
func typeLabel(t TokenType) string {
	if !t.Supported() {
		return "unknown"
	}
	return strconv.Itoa(int(t))
}

// wireType returns the token_type a token or token request in wire form
// starts with, 0 when it is too short.
func wireType(b []byte) TokenType {
	if len(b) < 2 {
		return 0
	}
	return TokenType(binary.BigEndian.Uint16(b))
}

// newCounter returns a counter vector by token_type and outcome with the
// series of outcome for each of types made up front, at 0.
func newCounter(name, help, outcome string, types []TokenType) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"token_type", "outcome"})
	for _, t := range types {
		c.WithLabelValues(typeLabel(t), outcome)
	}
	return c
}

// codeOf returns the problem code of a refused redemption.
func codeOf(err error) string {
	var re *RedeemError
	if errors.As(err, &re) {
		return re.Code
	}
	return CodeInternal
}

// Metrics returns the origin's metrics (MetricRedemptions), to register
// with a prometheus.Registerer: every redemption through Redeem,
// Middleware or the server's /v1/redeem is counted.
func (o *Origin) Metrics() prometheus.Collector { return o.redemptions }

// Metrics returns the server's metrics, to register with a
// prometheus.Registerer: MetricTokenRequests and the origin's
// MetricRedemptions.
func (s *Server) Metrics() prometheus.Collector {
	return collectors{s.requests, s.origin.redemptions}
}

// collectors is a Collector of several.
type collectors []prometheus.Collector

func (cs collectors) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range cs {
		c.Describe(ch)
	}
}

func (cs collectors) Collect(ch chan<- prometheus.Metric) {
	for _, c := range cs {
		c.Collect(ch)
	}
}
