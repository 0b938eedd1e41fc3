// Package metricstest reads Prometheus metrics in tests, as the text format
// writes them. It is for tests only.
//
// In the common case, read a collector and check one series:
//
//	text := metricstest.Collected(t, issuer.Metrics())
//	metricstest.Want(t, text, `spent_ecash_spends_total{outcome="fresh"}`, 1)
//
// A series is written name{label="value",...}, labels sorted by name; a
// histogram's count is the series name_count{...}.
package metricstest

import (
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// Collected returns the samples c exports, one a line, without the HELP and
// TYPE comments, in the order a registry gathers them (by name, then
// labels). It fails the test when c is inconsistent.
func Collected(tb testing.TB, c prometheus.Collector) string {
	tb.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	return Gathered(tb, reg)
}

// Gathered returns the samples g gathers, as Collected does.
func Gathered(tb testing.TB, g prometheus.Gatherer) string {
	tb.Helper()
	mfs, err := g.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			tb.Fatal(err)
		}
	}
	var out strings.Builder
	for l := range strings.Lines(b.String()) {
		if !strings.HasPrefix(l, "#") {
			out.WriteString(l)
		}
	}
	return out.String()
}

// Want fails the test unless text has the sample series with the value
// want.
func Want(tb testing.TB, text, series string, want float64) {
	tb.Helper()
	for l := range strings.Lines(text) {
		v, ok := strings.CutPrefix(strings.TrimSuffix(l, "\n"), series+" ")
		if !ok {
			continue
		}
		got, err := strconv.ParseFloat(v, 64)
		if err != nil {
			tb.Fatalf("%s: value %q: %v", series, v, err)
		}
		if got != want {
			tb.Fatalf("%s: got %v, want %v", series, got, want)
		}
		return
	}
	tb.Fatalf("no sample %s in:\n%s", series, text)
}
